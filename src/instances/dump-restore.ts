// A database copied beside the service (pg_dump | pg_restore), from one PostgreSQL server to the same
// or another: staging copies, moves and the pools' template copies all copy this way.
import { spawn } from 'node:child_process';
import { sessionOptions } from '../postgresql/index.js';

export interface PgConnection {
  host: string;
  port: number;
  user: string;
  password: string | null;
}

/**
 * A consistent online copy: pg_dump takes one snapshot of the live database (the customer's Odoo
 * keeps reading and writing; nothing is locked but against DDL) and pg_restore writes it into
 * `target` as `to.user` (the tenant's own role: every object of the copy is its own, no ACL of the
 * source). `from` and `to` may be two servers. Answers pg_restore's end of output; rejects with both
 * programs' errors.
 */
export function dumpAndRestore(
  from: PgConnection,
  to: PgConnection,
  source: string,
  target: string,
  timeoutMs: number,
  path: string,
): Promise<string> {
  // Only what the two programs need: not the service's environment (its master key, its URLs). PGOPTIONS:
  // svc's own settings over whatever the database or the role sets (a `statement_timeout` or a `role`).
  const env = (pg: PgConnection) => ({
    PATH: path,
    PGPASSWORD: pg.password ?? '',
    PGCONNECT_TIMEOUT: '10',
    PGOPTIONS: sessionOptions(pg.host, pg.port),
  });
  const conn = (pg: PgConnection) => ['-h', pg.host, '-p', String(pg.port), '-U', pg.user];
  return new Promise((resolve, reject) => {
    const dump = spawn('pg_dump', [...conn(from), '-Fc', '-Z', '0', '-d', source], { env: env(from), stdio: ['ignore', 'pipe', 'pipe'] });
    const restore = spawn('pg_restore', [...conn(to), '--no-owner', '--no-acl', '--exit-on-error', '-d', target], {
      env: env(to),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let dumpErr = '';
    let restoreOut = '';
    dump.stderr.on('data', (c: Buffer) => (dumpErr += c.toString()));
    restore.stderr.on('data', (c: Buffer) => (restoreOut += c.toString()));
    restore.stdout.on('data', (c: Buffer) => (restoreOut += c.toString()));
    dump.stdout.pipe(restore.stdin);
    restore.stdin.on('error', () => {}); // pg_restore gone: its own exit says why
    const timer = setTimeout(() => {
      dump.kill('SIGKILL');
      restore.kill('SIGKILL');
    }, timeoutMs);
    const codes: { dump?: number | null; restore?: number | null } = {};
    const settle = () => {
      if (!('dump' in codes) || !('restore' in codes)) return;
      clearTimeout(timer);
      if (codes.dump === 0 && codes.restore === 0) resolve(restoreOut.trim().slice(-500));
      else {
        const said = [dumpErr.trim() && `pg_dump: ${dumpErr.trim()}`, restoreOut.trim() && `pg_restore: ${restoreOut.trim()}`]
          .filter(Boolean)
          .join('\n');
        reject(
          new Error(`copying ${source} to ${target} failed (pg_dump ${codes.dump}, pg_restore ${codes.restore}): ${said.slice(-1500)}`),
        );
      }
    };
    dump.on('error', reject);
    restore.on('error', reject);
    dump.on('close', (code) => {
      codes.dump = code;
      settle();
    });
    restore.on('close', (code) => {
      codes.restore = code;
      // pg_restore gave up: nothing reads pg_dump's output any more, and it would wait on the pipe for ever.
      if (code !== 0 && !('dump' in codes)) dump.kill('SIGTERM');
      settle();
    });
  });
}
