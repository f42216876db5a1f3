// The room a PostgreSQL server has where it keeps its data. A server record is an address and a
// role, no SSH access, so the server measures it itself: COPY ... FROM PROGRAM runs `df` as
// PostgreSQL's OS user in the backend's working directory, which is the data directory (where a
// database made from template0 goes, in the default tablespace). It needs a superuser (or
// pg_execute_server_program), which the administrator role svc signs in as is for moves.
import { diskSpaceScript, type DiskSpace, parseDiskSpace } from '../core/disk-space.js';

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** Bytes free in the connected server's data directory, and which disk of which machine it is. */
export async function dataDiskOf(query: Query): Promise<DiskSpace> {
  await query('BEGIN');
  try {
    await query('CREATE TEMPORARY TABLE svc_data_disk (n serial, line text) ON COMMIT DROP');
    await query(`COPY svc_data_disk (line) FROM PROGRAM ${literal(diskSpaceScript('.'))}`);
    const { rows } = await query('SELECT line FROM svc_data_disk ORDER BY n');
    return parseDiskSpace(rows.map((r) => String(r.line)).join('\n'));
  } finally {
    // Only a temporary table to drop (ON COMMIT DROP): a connection gone takes it and the transaction with it.
    await query('ROLLBACK').catch(() => {});
  }
}
