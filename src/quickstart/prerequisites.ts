// What this machine must have before quickstart changes anything: each check answers the line that
// says what is missing and how to get it, or null. All are run, so the operator sees every gap at once.
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { access, constants } from 'node:fs/promises';
import { connect } from 'node:net';
import pg from 'pg';
import type { Config } from '../core/config.js';
import { checkRedis } from '../core/reachability.js';
import type { QuickstartOptions } from './quickstart-options.js';
import { isAuthorized, localUser, type MachineKey } from './machine-key.js';

const TIMEOUT_MS = 5_000;

/** Programs the host scripts of setup_odoo and setup_proxy use and cannot install themselves, with their Debian package. */
const PROGRAMS: [program: string, pkg: string][] = [
  ['apt-get', 'apt'],
  ['dpkg-query', 'dpkg'],
  ['tar', 'tar'],
  ['gzip', 'gzip'],
  ['sha256sum', 'coreutils'],
  ['flock', 'util-linux'],
  ['setpriv', 'util-linux'],
  ['ssh-keygen', 'openssh-client'],
];
const BIN_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

async function program(name: string): Promise<boolean> {
  for (const dir of BIN_DIRS) {
    try {
      await access(`${dir}/${name}`, constants.X_OK);
      return true;
    } catch {
      /* not here */
    }
  }
  return false;
}

/** An SSH server's banner on host:port within the timeout. */
function sshBanner(host: string, port: number): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    const done = (v: string | null) => {
      socket.destroy();
      resolve(v);
    };
    socket.setTimeout(TIMEOUT_MS, () => done(null));
    socket.once('error', () => done(null));
    socket.once('data', (chunk) => done(chunk.toString('latin1').split('\n')[0]!.trim()));
  });
}

async function checkSshd(o: QuickstartOptions): Promise<string | null> {
  const banner = await sshBanner(o.ssh.host, o.ssh.port);
  if (banner?.startsWith('SSH-')) return null;
  return `an SSH server on ${o.ssh.host}:${o.ssh.port}: apt-get install openssh-server and start it (or name another with --ssh-host/--ssh-port)`;
}

/** PostgreSQL of DATABASE_URL as a superuser (it makes svc's database and the host's role). */
async function checkPostgresSuperuser(config: Config): Promise<string | null> {
  const url = new URL(config.DATABASE_URL);
  const at = `${url.username || 'postgres'}@${url.hostname}:${url.port || 5432}`;
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: TIMEOUT_MS });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ rolsuper: boolean }>('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
    if (rows[0]?.rolsuper) return null;
    return `a PostgreSQL superuser in DATABASE_URL: ${at} is not one (ALTER ROLE … SUPERUSER, or name the postgres user)`;
  } catch (err) {
    return `PostgreSQL at ${at} (DATABASE_URL): ${(err as Error).message.split('\n')[0]} (apt-get install postgresql, or set DATABASE_URL)`;
  } finally {
    // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
    await client.end().catch(() => {});
  }
}

async function checkRedisUp(config: Config): Promise<string | null> {
  try {
    await checkRedis(config);
    return null;
  } catch (err) {
    return `Redis: ${(err as Error).message} (apt-get install redis-server, or set REDIS_URL)`;
  }
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** A local tarball must be there with that checksum; an https one is checked by setup_odoo on the host. */
async function checkSource(o: QuickstartOptions): Promise<string | null> {
  if (o.source.kind === 'url') return null;
  if (!existsSync(o.source.path)) return `the Odoo source ${o.source.path} (--odoo-source): no such file`;
  const actual = await sha256Of(o.source.path);
  if (actual === o.sha256) return null;
  return `the Odoo source with SHA-256 ${o.sha256} (--sha256): ${o.source.path} has ${actual}`;
}

/** The login user exists here, and svc's key is in its authorized_keys or the operator lets quickstart put it there. */
async function checkTrust(o: QuickstartOptions, key: MachineKey, keysFile: string): Promise<string | null> {
  const user = await localUser(o.ssh.user);
  if (!user) return `the user ${o.ssh.user} (--ssh-user) on this machine`;
  if (o.trust || (await isAuthorized(keysFile, key))) return null;
  return (
    `svc's SSH key in ${keysFile}: run again with --trust-this-machine to add it there, ` +
    `or add this line to it yourself: ${key.publicLine}`
  );
}

/** Every missing prerequisite, one line each; empty when the machine has all. `keysFile`: the login user's authorized_keys. */
export async function missingPrerequisites(config: Config, o: QuickstartOptions, key: MachineKey, keysFile: string): Promise<string[]> {
  const checks: Promise<string | null>[] = [
    checkSshd(o),
    checkPostgresSuperuser(config),
    checkRedisUp(config),
    program('python3').then((ok) => (ok && existsSync('/usr/bin/python3') ? null : '/usr/bin/python3: apt-get install python3')),
    ...PROGRAMS.map(async ([name, pkg]) => ((await program(name)) ? null : `${name}: apt-get install ${pkg}`)),
    o.ssh.user === 'root'
      ? Promise.resolve(null)
      : program('sudo').then((ok) => (ok ? null : `sudo (--ssh-user ${o.ssh.user} is not root): apt-get install sudo`)),
    checkSource(o),
    checkTrust(o, key, keysFile),
  ];
  return (await Promise.all(checks)).filter((line): line is string => line !== null);
}
