// One tenant as one unit, laid out as Odoo's own backup zip: dump.sql (a plain pg_dump made as the
// tenant's role), filestore/ (the instance's filestore from its Odoo host) and manifest.json.
//
// Consistency: while the filestore is copied, a transaction of the tenant's role holds ROW EXCLUSIVE
// on ir_attachment and exports the snapshot pg_dump reads. Odoo's only deleter of stored files (its
// filestore garbage collector) first takes SHARE on ir_attachment with a 10 s lock_timeout and gives
// up until its next run, so no file the dump refers to can go before it is copied; the tenant's own
// writes (ROW EXCLUSIVE too) go on. Files added meanwhile are copied or not: the dump does not name them.
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { shellQuote } from '../core/ssh.js';
import { databaseOwner, onServer } from '../instances/index.js';
import { connectPostgresqlServer, quoteIdent, sessionOptions } from '../postgresql/index.js';
import { checkedResult, openRemoteSession, type Audit } from '../servers/index.js';
import type { TenantSource } from './tenant-source.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

const DUMP_TIMEOUT_MS = 6 * 60 * 60_000;

export interface CapturedUnit {
  /** Files of the filestore copied; null for a database without an Odoo host. */
  files: number | null;
  /** Files the dump refers to that the host's filestore lacks (missing there before the backup). */
  missingFiles: number;
}

export interface PgLogin {
  host: string;
  port: number;
  user: string;
  password: string | null;
  /** The role the session runs as when it signs in as another (SET ROLE; pg_dump --role). */
  role?: string;
}

/** Runs a local program with only what it needs in its environment; rejects with its stderr. */
export function runLocal(
  cmd: string,
  args: string[],
  o: { env: Record<string, string>; stdin?: NodeJS.ReadableStream; timeoutMs: number; what: string },
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: o.env, stdio: [o.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-4000)));
    child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    if (o.stdin) {
      child.stdin!.on('error', () => {}); // the program's own exit says why
      o.stdin.pipe(child.stdin!);
    }
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new UserError(`${o.what}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new UserError(`${o.what} failed (${signal ?? `exit ${code}`}): ${err.trim().slice(-1500)}`));
    });
  });
}

/** PostgreSQL's programs get PATH, the password and svc's session settings, never svc's own environment. */
export const pgEnv = (config: { PATH: string }, login: PgLogin) => ({
  PATH: config.PATH,
  PGPASSWORD: login.password ?? '',
  PGCONNECT_TIMEOUT: '10',
  PGOPTIONS: sessionOptions(login.host, login.port),
});

export const pgArgs = (login: PgLogin) => ['-h', login.host, '-p', String(login.port), '-U', login.user];

/** The role the tenant's database is read as, with its password revealed. */
export async function tenantLogin(ctx: Ctx, src: TenantSource): Promise<PgLogin> {
  const { pg } = src;
  const user = src.role?.user ?? (await onServer(ctx.secretBox, pg, (q) => databaseOwner(q, src.dbName)));
  if (!user) throw new UserError(`Database ${src.dbName} does not exist on ${pg.ip}:${pg.port}`);
  return { host: pg.ip, port: pg.port, user, password: await ctx.secretBox.reveal(src.role?.password ?? null) };
}

/**
 * The Odoo series a database was made by ("18.0", "saas~18.2"): its base module's installed version
 * begins with it (Odoo writes "<series>.<module version>"). The host's version record is an
 * operator's name for a source ("18.0-custom"), the fallback only.
 */
function odooSeriesOf(modules: Record<string, string>, fallback: string | null): string {
  const m = /^((?:saas~)?\d+\.\d+)\./.exec(modules.base ?? '');
  return m?.[1] ?? fallback ?? '';
}

/** Odoo's manifest.json of a backup (what its database manager writes). */
function manifestOf(src: TenantSource, pgVersion: string, modules: Record<string, string>, missingFiles: number) {
  const series = odooSeriesOf(modules, src.odooVersion);
  const [major, minor] = series.split('.').map((n) => Number.parseInt(n, 10));
  return {
    odoo_dump: '1',
    db_name: src.dbName,
    version: series,
    version_info: Number.isInteger(major) ? [major, minor ?? 0, 0, 'final', 0, ''] : [],
    major_version: series,
    pg_version: pgVersion,
    modules,
    svc_missing_files: missingFiles,
  };
}

async function countFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) out.push(path.relative(dir, path.join(entry.parentPath, entry.name)));
  }
  return out;
}

/** Streams the host's filestore into `into` (tar over SSH, extracted here). */
async function copyFilestore(ctx: Ctx, src: TenantSource, into: string, audit: Audit) {
  const session = await openRemoteSession(ctx, src.host!, audit).catch((err: Error) => {
    throw new UserError(`Odoo host ${src.host!.name ?? src.host!.ip} (root server ${src.host!.id}) could not be reached: ${err.message}`);
  });
  try {
    const tar = spawn('tar', ['-x', '-f', '-', '-C', into, '--no-same-owner'], {
      env: { PATH: ctx.config.PATH },
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let tarErr = '';
    tar.stderr.on('data', (c: Buffer) => (tarErr = (tarErr + c.toString()).slice(-2000)));
    tar.stdin.on('error', () => {});
    const extracted = new Promise<number | null>((resolve) => tar.on('close', resolve));
    // A filestore that does not exist yet is an empty archive, not a failure.
    const script = [`p=${shellQuote(src.filestore!)}`, 'if [ -d "$p" ]; then tar -C "$p" -cf - .; else tar -cf - -T /dev/null; fi'].join(
      '\n',
    );
    const sent = await session.run(script, { timeoutMs: DUMP_TIMEOUT_MS, stdoutTo: tar.stdin, label: `tar -C ${src.filestore} -cf - .` });
    // Judged once the local tar has ended too: a failed read leaves no tar still writing into `into`.
    const code = await extracted;
    checkedResult(session, `Reading the filestore ${src.filestore} on root server ${src.host!.id} failed`, sent, DUMP_TIMEOUT_MS);
    if (code !== 0) throw new UserError(`Extracting the filestore of ${src.dbName} failed: ${tarErr.trim()}`);
  } finally {
    session.close();
  }
}

/** Whether this machine's pg_dump takes --restrict-key (15.14, 16.10, 17.6 and later). */
let restrictKeyKnown: Promise<boolean> | null = null;
function takesRestrictKey(config: { PATH: string }): Promise<boolean> {
  restrictKeyKnown ??= runLocal('pg_dump', ['--help'], { env: { PATH: config.PATH }, timeoutMs: 30_000, what: 'pg_dump --help' }).then(
    (help) => help.includes('--restrict-key'),
    () => false,
  );
  return restrictKeyKnown;
}

/**
 * The key of the dump's \restrict line, the same for every dump of one database: pg_dump's random
 * one made each dump's first and last chunks new to restic (1-5 MB a backup, whatever the tenant).
 */
const restrictKey = (ctx: Ctx, dbName: string) =>
  createHmac('sha256', ctx.secretBox.deriveKey('backup-server:restrict-key')).update(dbName).digest('hex').slice(0, 40);

async function pgDump(ctx: Ctx, login: PgLogin, src: TenantSource, file: string, snapshot: string | null) {
  const args = [
    ...pgArgs(login),
    ...(login.role ? [`--role=${login.role}`] : []),
    '--no-owner',
    '--no-privileges',
    `--file=${file}`,
    ...(snapshot ? [`--snapshot=${snapshot}`] : []),
    ...((await takesRestrictKey(ctx.config)) ? [`--restrict-key=${restrictKey(ctx, src.dbName)}`] : []),
  ];
  await runLocal('pg_dump', [...args, `--dbname=${src.dbName}`], {
    env: pgEnv(ctx.config, login),
    timeoutMs: DUMP_TIMEOUT_MS,
    what: `pg_dump of ${src.dbName} (as ${login.role ?? login.user})`,
  });
}

/**
 * The session the unit is read under, and the login pg_dump signs in with: the tenant's role. A
 * suspended subscription's database is opened by svc for its backup to superusers only (CONNECTION
 * LIMIT 0 keeps Odoo and the customer out), so the tenant's role is refused there for the
 * connection limit: then both sign in as the PostgreSQL server's administrator and run as the
 * tenant's role (SET ROLE; pg_dump --role), so the dump still reads with the tenant's rights only
 * (§12). pg_dump runs only its own queries, with an empty search_path.
 */
async function dumpSession(ctx: Ctx, src: TenantSource, tenant: PgLogin): Promise<{ client: pg.Client; login: PgLogin }> {
  const connect = (username: string, password: string | null) =>
    connectPostgresqlServer(ctx.secretBox, { ip: tenant.host, port: tenant.port, username, password }, src.dbName);
  const refused = (who: string, err: unknown) =>
    new UserError(`Could not connect to database ${src.dbName} on ${tenant.host}:${tenant.port} as ${who}: ${(err as Error).message}`);
  try {
    return { client: (await connect(tenant.user, src.role?.password ?? null)).client, login: tenant };
  } catch (err) {
    if ((err as { code?: string }).code !== '53300') throw refused(tenant.user, err); // too_many_connections
    const admin = src.pg.username ?? 'postgres';
    const { client } = await connect(admin, src.pg.password).catch((e: unknown) => {
      throw refused(`${tenant.user}, nor as ${admin}`, e);
    });
    try {
      const { rows } = await client.query('SELECT datconnlimit FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()');
      if (rows[0]?.datconnlimit !== 0) throw refused(tenant.user, err); // a limit reached, not a database closed to the tenant
      await client.query(`SET ROLE ${quoteIdent(tenant.user)}`);
    } catch (e) {
      // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
      await client.end().catch(() => {});
      throw e;
    }
    const password = await ctx.secretBox.reveal(src.pg.password);
    return { client, login: { host: tenant.host, port: tenant.port, user: admin, password, role: tenant.user } };
  }
}

/** The unit of `src` in `dir` (emptied first): dump.sql, filestore/, manifest.json. */
export async function captureUnit(ctx: Ctx, src: TenantSource, dir: string, audit: Audit): Promise<CapturedUnit> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(path.join(dir, 'filestore'), { recursive: true, mode: 0o700 });
  const dumpFile = path.join(dir, 'dump.sql');
  const { client, login } = await dumpSession(ctx, src, await tenantLogin(ctx, src));
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await client.query("SET LOCAL lock_timeout = '30s'");
    const odoo = (await client.query("SELECT pg_catalog.to_regclass('public.ir_attachment') IS NOT NULL AS odoo")).rows[0].odoo as boolean;
    // In the administrator's session (a database closed to its role, login.role set) no table of the
    // tenant's is read: a view or a policy of its could run its code there and RESET ROLE to the
    // administrator. pg_dump reads the catalogs and COPYs rows, which run none.
    const readTenantTables = odoo && !login.role;
    if (odoo && src.host) await client.query('LOCK TABLE public.ir_attachment IN ROW EXCLUSIVE MODE');
    const snapshot = (await client.query('SELECT pg_catalog.pg_export_snapshot() AS s')).rows[0].s as string;
    const pgVersion = (await client.query('SHOW server_version')).rows[0].server_version as string;
    const modules: Record<string, string> = {};
    if (readTenantTables) {
      const { rows } = await client.query(
        "SELECT name, latest_version FROM public.ir_module_module WHERE state = 'installed' ORDER BY name",
      );
      for (const r of rows) modules[String(r.name)] = String(r.latest_version ?? '');
    }
    await Promise.all([
      pgDump(ctx, login, src, dumpFile, snapshot),
      src.host ? copyFilestore(ctx, src, path.join(dir, 'filestore'), audit) : Promise.resolve(),
    ]);
    let files: number | null = null;
    let missingFiles = 0;
    if (src.host) {
      const have = new Set(await countFiles(path.join(dir, 'filestore')));
      files = have.size;
      if (readTenantTables) {
        const { rows } = await client.query('SELECT DISTINCT store_fname FROM public.ir_attachment WHERE store_fname IS NOT NULL');
        missingFiles = rows.filter((r) => !have.has(String(r.store_fname))).length;
      }
    }
    await client.query('COMMIT');
    await writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifestOf(src, pgVersion, modules, missingFiles), null, 2));
    return { files, missingFiles };
  } finally {
    // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
    await client.end().catch(() => {});
  }
}
