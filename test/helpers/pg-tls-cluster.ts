// A second, throw-away PostgreSQL cluster with ssl=on, for tests of the TLS path: initdb and
// pg_ctl (Debian's, of the newest version installed; scripts/prerequisites.sh installs them) run as
// the postgres OS user in a temp dir, a self-signed certificate from openssl, and a pg_hba.conf
// that accepts only TLS sessions with a password (plain TCP is rejected).
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import { freePort } from './sshd.js';

const SERVERS = '/usr/lib/postgresql';

/** The server programs of the newest PostgreSQL installed. */
function serverBin(): string {
  const versions = existsSync(SERVERS) ? readdirSync(SERVERS).filter((v) => existsSync(`${SERVERS}/${v}/bin/initdb`)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no initdb under ${SERVERS}/<version>/bin: run scripts/prerequisites.sh (Debian's postgresql)`);
  return `${SERVERS}/${newest}/bin`;
}

export interface TlsCluster {
  port: number;
  user: string;
  password: string;
  stop(): void;
}

function asPostgres(cmd: string, args: string[]) {
  const me = userInfo().username;
  if (me === 'postgres') return execFileSync(cmd, args, { stdio: 'pipe' });
  if (process.getuid?.() !== 0) throw new Error(`the TLS cluster needs root or the postgres user (running as ${me})`);
  return execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' });
}

export async function startTlsCluster(): Promise<TlsCluster> {
  const bin = serverBin();
  const dir = mkdtempSync('/tmp/svc-pg-tls-');
  const data = path.join(dir, 'data');
  const user = 'svc_tls_admin';
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const port = await freePort();
  writeFileSync(path.join(dir, 'pwfile'), `${password}\n`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-keyout',
      path.join(dir, 'server.key'),
      '-out',
      path.join(dir, 'server.crt'),
    ],
    { stdio: 'pipe' },
  );
  execFileSync('chmod', ['600', path.join(dir, 'server.key')]);
  if (process.getuid?.() === 0) execFileSync('chown', ['-R', 'postgres:postgres', dir]);
  else chownSync(dir, process.getuid!(), process.getgid!());

  asPostgres(`${bin}/initdb`, ['-D', data, '-U', user, `--pwfile=${path.join(dir, 'pwfile')}`, '-A', 'scram-sha-256', '--no-sync']);
  appendFileSync(
    path.join(data, 'postgresql.conf'),
    [
      `port = ${port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'ssl = on',
      `ssl_cert_file = '${dir}/server.crt'`,
      `ssl_key_file = '${dir}/server.key'`,
      'fsync = off',
      'shared_buffers = 16MB',
      'max_connections = 20',
      '',
    ].join('\n'),
  );
  writeFileSync(
    path.join(data, 'pg_hba.conf'),
    ['hostssl all all 127.0.0.1/32 scram-sha-256', 'hostnossl all all 127.0.0.1/32 reject', ''].join('\n'),
  );
  asPostgres(`${bin}/pg_ctl`, ['-D', data, '-l', path.join(dir, 'server.log'), '-w', '-t', '60', 'start']);

  return {
    port,
    user,
    password,
    stop() {
      try {
        asPostgres(`${bin}/pg_ctl`, ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
