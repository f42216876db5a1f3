// Connects to a stored PostgreSQL server record. Like libpq's sslmode=prefer: TLS is
// tried first and used when the server offers it; a server without TLS gets a plain connection.
// Certificates are not verified (the record holds no CA), as with `prefer`.
import pg from 'pg';
import type { SecretBox } from '../core/crypto.js';

export interface PostgresqlServerRecord {
  ip: string;
  port: number;
  username: string | null;
  password: string | null; // ciphertext
}

const CONNECT_TIMEOUT_MS = 10_000;
const STATEMENT_TIMEOUT_MS = 120_000;

/** Opens a client to `database` on the server; the caller ends it. */
export async function connectPostgresqlServer(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database = 'postgres',
): Promise<{ client: pg.Client; tls: boolean }> {
  const base: pg.ClientConfig = {
    host: server.ip,
    port: server.port,
    user: server.username ?? 'postgres',
    password: (await secretBox.reveal(server.password)) ?? undefined,
    database,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    statement_timeout: STATEMENT_TIMEOUT_MS,
    application_name: 'svc',
  };
  const tlsClient = quiet(new pg.Client({ ...base, ssl: { rejectUnauthorized: false } }));
  try {
    await tlsClient.connect();
    return { client: tlsClient, tls: true };
  } catch (err) {
    await tlsClient.end().catch(() => {});
    if (!/does not support SSL/i.test((err as Error).message)) throw err;
  }
  const plain = quiet(new pg.Client(base));
  try {
    await plain.connect();
  } catch (err) {
    await plain.end().catch(() => {});
    throw err;
  }
  return { client: plain, tls: false };
}

/**
 * A server that ends the connection while no query runs (a restart, a terminated backend) makes
 * the client emit 'error': unheard, that would end the process. The next query fails instead.
 */
function quiet(client: pg.Client): pg.Client {
  client.on('error', () => {});
  return client;
}

/** Quotes an identifier (database or role name) for SQL. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
