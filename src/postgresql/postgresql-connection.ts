// Connects to a stored PostgreSQL server record. Like libpq's sslmode=prefer: TLS is
// tried first and used when the server offers it; a server without TLS gets a plain connection.
// Certificates are not verified (the record holds no CA), as with `prefer`.
import pg from 'pg';
import type { SecretBox } from '../core/crypto.js';
import { newerSettings, noteServerVersion, sessionOptions } from './session-settings.js';

export interface PostgresqlServerRecord {
  ip: string;
  port: number;
  username: string | null;
  password: string | null; // ciphertext
}

const CONNECT_TIMEOUT_MS = 10_000;
const STATEMENT_TIMEOUT_MS = 120_000;

/**
 * Opens a client to `database` on the server; the caller ends it. Its session starts with svc's own
 * settings whatever the database or the role sets (session-settings.ts).
 */
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
    options: sessionOptions(server.ip, server.port),
  };
  const known = newerSettings(server.ip, server.port) !== null;
  const tlsClient = quiet(new pg.Client({ ...base, ssl: { rejectUnauthorized: false } }), server);
  try {
    await tlsClient.connect();
    return { client: await pinNewer(tlsClient, server, known), tls: true };
  } catch (err) {
    // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
    await tlsClient.end().catch(() => {});
    if (!/does not support SSL/i.test((err as Error).message)) throw err;
  }
  const plain = quiet(new pg.Client(base), server);
  try {
    await plain.connect();
    return { client: await pinNewer(plain, server, known), tls: false };
  } catch (err) {
    // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
    await plain.end().catch(() => {});
    throw err;
  }
}

/**
 * The server's version is learnt from its startup answer; the settings of newer versions not sent at
 * startup (its version was not known yet) are set at once (later connections send them at startup).
 */
async function pinNewer(client: pg.Client, server: PostgresqlServerRecord, known: boolean): Promise<pg.Client> {
  const newer = known ? null : newerSettings(server.ip, server.port);
  if (newer && newer.length > 0) {
    await client.query(
      `SELECT ${newer.map((_, i) => `pg_catalog.set_config($${2 * i + 1}, $${2 * i + 2}, false)`).join(', ')}`,
      newer.flat(),
    );
  }
  return client;
}

/**
 * A server that ends the connection while no query runs (a restart, a terminated backend) makes
 * the client emit 'error': unheard, that would end the process. The next query fails instead.
 * The server's version is noted from its startup answer.
 */
function quiet(client: pg.Client, server: PostgresqlServerRecord): pg.Client {
  client.on('error', () => {});
  const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
  connection.on('parameterStatus', (msg: { parameterName: string; parameterValue: string }) => {
    if (msg.parameterName === 'server_version') noteServerVersion(server.ip, server.port, msg.parameterValue);
  });
  return client;
}

/** Quotes an identifier (database or role name) for SQL. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
