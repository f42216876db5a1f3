// A private PostgreSQL primary with a streaming replica behind HAProxy, on loopback, for bench:ha
// and the high-availability tests (docs/high-availability.md shows the same set-up for real
// machines). initdb, pg_ctl and pg_basebackup (Debian's, run as the postgres OS user) make the
// primary and, with `pg_basebackup -R`, its replica; replication is synchronous (a COMMIT returns
// once the replica has the WAL), so a transaction acknowledged by the primary survives its loss.
// HAProxy sends connections only to the server that is not in recovery: its health check runs
// `SELECT pg_is_in_recovery()` (an external check), so a promoted replica takes over, and an old
// primary that comes back as a primary while the other was promoted would be taken too: the
// promotion step fences it (see the docs). Sessions to a server marked down are cut.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './sshd.js';

const SERVERS = '/usr/lib/postgresql';
/** HAProxy's check interval (ms); three failed checks in a row mark a server down, one passed marks it up. */
export const CHECK_INTER_MS = 1_000;

function serverBin(): string {
  const versions = existsSync(SERVERS) ? readdirSync(SERVERS).filter((v) => existsSync(`${SERVERS}/${v}/bin/pg_basebackup`)) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) throw new Error(`no pg_basebackup under ${SERVERS}/<version>/bin: run scripts/prerequisites.sh (Debian's postgresql)`);
  return `${SERVERS}/${newest}/bin`;
}

function asPostgres(cmd: string, args: string[]) {
  const me = userInfo().username;
  if (me === 'postgres') return execFileSync(cmd, args, { stdio: 'pipe' });
  if (process.getuid?.() !== 0) throw new Error(`the PostgreSQL clusters need root or the postgres user (running as ${me})`);
  return execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' });
}

export interface PgNode {
  name: 'a' | 'b';
  port: number;
  data: string;
}

export interface PgFailover {
  /** postgresql://postgres@127.0.0.1:<HAProxy>/<database>: the service's DATABASE_URL. */
  url: string;
  /** The same database on one server directly (not through HAProxy). */
  directUrl(node: PgNode): string;
  primary: PgNode;
  replica: PgNode;
  /** `pg_ctl stop -m immediate` of a server: as a crash, nothing written at shutdown. */
  kill(node: PgNode): void;
  /**
   * `pg_ctl promote`: the replica becomes a primary (a new timeline). With no standby of its own
   * yet, it must not wait for one: synchronous replication is turned off on it, as Patroni's
   * synchronous_mode does when the last standby is gone (otherwise every COMMIT waits forever).
   */
  promote(node: PgNode): Promise<void>;
  /** HAProxy's lines saying a server went down or up, with the time they were read. */
  proxyEvents(): string[];
  /** The server a new connection through HAProxy reaches now (null: none, or it is not answering). */
  servedBy(): Promise<PgNode | null>;
  stop(): Promise<void>;
}

export async function startPgFailover(database = 'svc'): Promise<PgFailover> {
  const bin = serverBin();
  const dir = mkdtempSync('/tmp/svc-pg-ha-');
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:postgres', dir]);
  const primary: PgNode = { name: 'a', port: await freePort(), data: path.join(dir, 'a') };
  const replica: PgNode = { name: 'b', port: await freePort(), data: path.join(dir, 'b') };
  const settings = (node: PgNode) =>
    [
      `port = ${node.port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'fsync = off', // a crash here is a killed process, never a lost OS cache
      'shared_buffers = 32MB',
      'max_connections = 100',
      'wal_level = replica',
      'max_wal_senders = 5',
      'hot_standby = on',
      `cluster_name = 'svc-${node.name}'`,
      '',
    ].join('\n');
  // Only the primary waits for a synchronous standby (the replica has none until it is promoted).
  const synchronous = [`synchronous_standby_names = '*'`, 'synchronous_commit = on', ''].join('\n');
  const start = (node: PgNode) => asPostgres(`${bin}/pg_ctl`, ['-D', node.data, '-l', `${node.data}.log`, '-w', '-t', '60', 'start']);

  asPostgres(`${bin}/initdb`, ['-D', primary.data, '-U', 'postgres', '-A', 'trust', '--no-sync']);
  appendFileSync(path.join(primary.data, 'postgresql.conf'), settings(primary) + synchronous);
  appendFileSync(path.join(primary.data, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
  start(primary);
  const admin = new pg.Client({ host: '127.0.0.1', port: primary.port, user: 'postgres', database: 'postgres' });
  await admin.connect();
  // Until the replica runs, a synchronous commit would wait for it: the database is made first.
  await admin.query(`SET synchronous_commit = local`);
  await admin.query(`CREATE DATABASE "${database}"`);
  await admin.end();

  asPostgres(`${bin}/pg_basebackup`, [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    replica.data,
    '-R',
    '-X',
    'stream',
    '-c',
    'fast',
  ]);
  appendFileSync(path.join(replica.data, 'postgresql.conf'), settings(replica));
  start(replica);

  // HAProxy in front: only the server not in recovery passes the check.
  const check = path.join(dir, 'pg-primary-check.sh');
  writeFileSync(
    check,
    [
      '#!/bin/sh',
      '# HAProxy external check: $3 address, $4 port of the server. Passes only on a primary.',
      'export PGCONNECT_TIMEOUT=5',
      `[ "$(psql -h "$3" -p "$4" -U postgres -d postgres -XAtqc 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]`,
      '',
    ].join('\n'),
  );
  chmodSync(check, 0o755);
  chmodSync(dir, 0o755);
  const proxyPort = await freePort();
  writeFileSync(
    path.join(dir, 'haproxy.cfg'),
    [
      'global',
      '  external-check',
      '  insecure-fork-wanted',
      'defaults',
      '  mode tcp',
      '  timeout connect 2s',
      '  timeout client 1h',
      '  timeout server 1h',
      // A check that is slow on a busy machine is not a failed one: a primary marked down by
      // mistake would have every session cut.
      '  timeout check 10s',
      'listen postgresql',
      `  bind 127.0.0.1:${proxyPort}`,
      '  option external-check',
      '  external-check path "/usr/bin:/bin"',
      `  external-check command ${check}`,
      `  default-server inter ${CHECK_INTER_MS} fall 3 rise 1 on-marked-down shutdown-sessions`,
      `  server a 127.0.0.1:${primary.port} check`,
      `  server b 127.0.0.1:${replica.port} check`,
      '',
    ].join('\n'),
  );
  const haproxy: ChildProcess = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let haproxyLog = '';
  const events: string[] = [];
  haproxy.stderr!.on('data', (chunk: Buffer) => {
    haproxyLog += chunk.toString();
    for (const line of chunk.toString().split('\n')) {
      const m = /Server postgresql\/(\w+) is (UP|DOWN)(, reason: [^,]*)?/.exec(line);
      if (m) events.push(`${new Date().toISOString().slice(11, 23)} ${m[1]} ${m[2]}${m[3] ?? ''}`);
    }
  });

  const url = `postgresql://postgres@127.0.0.1:${proxyPort}/${database}`;
  // HAProxy starts with every server up: only once the replica failed its first check does it
  // send connections to the primary alone.
  const deadline = Date.now() + 30_000;
  while (!haproxyLog.includes('Server postgresql/b is DOWN')) {
    if (Date.now() > deadline || haproxy.exitCode !== null) throw new Error(`HAProxy did not mark the replica down:\n${haproxyLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  const stopped = new Set<string>();
  return {
    url,
    directUrl: (node) => `postgresql://postgres@127.0.0.1:${node.port}/${database}`,
    primary,
    replica,
    proxyEvents: () => [...events],
    kill(node) {
      asPostgres(`${bin}/pg_ctl`, ['-D', node.data, '-m', 'immediate', '-w', 'stop']);
      stopped.add(node.name);
    },
    async promote(node) {
      asPostgres(`${bin}/pg_ctl`, ['-D', node.data, '-w', 'promote']);
      const c = new pg.Client({ host: '127.0.0.1', port: node.port, user: 'postgres', database: 'postgres' });
      await c.connect();
      try {
        await c.query(`ALTER SYSTEM SET synchronous_standby_names = ''`);
        await c.query('SELECT pg_reload_conf()');
      } finally {
        await c.end();
      }
    },
    async servedBy() {
      const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
      c.on('error', () => {});
      try {
        await c.connect();
        const port = (await c.query<{ port: number }>('SELECT inet_server_port() AS port')).rows[0]!.port;
        return [primary, replica].find((n) => n.port === port) ?? null;
      } catch {
        return null;
      } finally {
        await c.end().catch(() => {});
      }
    },
    async stop() {
      if (haproxy.exitCode === null) {
        const exited = new Promise((r) => haproxy.once('exit', r));
        haproxy.kill('SIGKILL');
        await exited;
      }
      for (const node of [primary, replica]) {
        if (stopped.has(node.name)) continue;
        try {
          asPostgres(`${bin}/pg_ctl`, ['-D', node.data, '-m', 'immediate', '-w', 'stop']);
        } catch {
          // already down
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
