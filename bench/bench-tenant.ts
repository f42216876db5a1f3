// A large tenant for the benches that move or copy one (bench:move, bench:backup): a deployed
// tenant's database filled with rows of its own table (made as its owner, stored uncompressed so
// that the megabytes are real) and its filestore on the Odoo host (this machine) with 1 MB files
// of random bytes, owned by the host's odoo user as Odoo's own files are.
import { execFileSync } from 'node:child_process';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';

export interface FilledTenant {
  /** pg_database_size after the fill. */
  dbBytes: number;
  /** The filestore's bytes (du -sb). */
  filesBytes: number;
}

/** Adds about `mb.db` MB to `database` (table public.bench_payload) and `mb.files` MB of files to `filestore` (in bench/). */
export async function fillTenant(database: string, filestore: string, mb: { db: number; files: number }): Promise<FilledTenant> {
  const [{ owner } = { owner: '' }] = await adminQuery<{ owner: string }>(
    'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
    [database],
  );
  // Each row is 32 md5 hex strings: 1 KB, so 1024 rows a MB.
  await queryIn(
    database,
    `SET ROLE "${owner}"; CREATE TABLE public.bench_payload (id serial PRIMARY KEY, body text);
     ALTER TABLE public.bench_payload ALTER COLUMN body SET STORAGE EXTERNAL;
     INSERT INTO public.bench_payload (body) SELECT string_agg(md5(random()::text || g::text || s::text), '') FROM generate_series(1, ${Math.round(mb.db * 1024)}) g, generate_series(1, 32) s GROUP BY g; RESET ROLE`,
  );
  const dir = `${filestore}/bench`;
  execFileSync('bash', [
    '-c',
    `mkdir -p ${dir} && for i in $(seq 1 ${mb.files}); do head -c 1048576 /dev/urandom > ${dir}/f$i; done && chown -R odoo:odoo ${filestore}`,
  ]);
  const [{ size } = { size: '0' }] = await adminQuery<{ size: string }>('SELECT pg_database_size($1)::text AS size', [database]);
  const filesBytes = Number(execFileSync('du', ['-sb', filestore], { encoding: 'utf8' }).split('\t')[0]);
  return { dbBytes: Number(size), filesBytes };
}
