// A second PostgreSQL cluster of this machine (trust on 127.0.0.1), run as the postgres OS user in a
// temp dir with Debian's newest server programs (scripts/prerequisites.sh installs them): the other
// end of a move in the real-Odoo suite and bench:move. `tmpfsMb`: its data on a file system of its
// own that size, which fillDisk() fills up to a few bytes (a server without room).
import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import pg from 'pg';

export interface LocalCluster {
  port: number;
  query<R extends pg.QueryResultRow>(database: string, sql: string, params?: unknown[]): Promise<R[]>;
  /** Fills its tmpfs (tmpfsMb) but `leaveBytes`. */
  fillDisk(leaveBytes: number): void;
  stop(): void;
}

export function startLocalCluster(port: number, opts: { tmpfsMb?: number } = {}): LocalCluster {
  const versions = readdirSync('/usr/lib/postgresql').filter((v) => existsSync(`/usr/lib/postgresql/${v}/bin/initdb`));
  const bin = `/usr/lib/postgresql/${versions.sort((a, b) => Number(b) - Number(a))[0]}/bin`;
  const dir = mkdtempSync('/tmp/svc-pg-local-');
  if (opts.tmpfsMb) execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${opts.tmpfsMb}m`, 'tmpfs', dir]);
  execFileSync('chown', ['postgres:postgres', dir]);
  const as = (cmd: string, args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' });
  as(`${bin}/initdb`, ['-D', `${dir}/data`, '-U', 'postgres', '-A', 'trust', '--no-sync']);
  const conf = [
    `port = ${port}`,
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${dir}'`,
    'fsync = off',
    // Debian's default, as the machine's own: an Odoo host on it must pass setup_odoo's sizing
    // check (its pools and a rollout's update process within max_connections, less svc's 20).
    'max_connections = 100',
  ];
  appendFileSync(`${dir}/data/postgresql.conf`, `${conf.join('\n')}\n`);
  as(`${bin}/pg_ctl`, ['-D', `${dir}/data`, '-w', '-l', `${dir}/log`, 'start']);
  return {
    port,
    async query<R extends pg.QueryResultRow>(database: string, sql: string, params: unknown[] = []) {
      const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database });
      await client.connect();
      try {
        return (await client.query<R>(sql, params)).rows;
      } finally {
        await client.end();
      }
    },
    fillDisk(leaveBytes) {
      const { bavail, bsize } = statfsSync(dir);
      execFileSync('fallocate', ['-l', String(Math.max(0, bavail * bsize - leaveBytes)), `${dir}/filler`]);
    },
    stop() {
      try {
        as(`${bin}/pg_ctl`, ['-D', `${dir}/data`, '-m', 'immediate', 'stop']);
      } finally {
        if (opts.tmpfsMb) execFileSync('umount', ['-l', dir]);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
