// The settings every session of svc's starts with, whatever a database or a role says. A tenant that
// owns its database may `ALTER DATABASE <its own> SET …` and `ALTER ROLE CURRENT_USER SET …` any
// setting a user may set (PostgreSQL lets no owner be refused that), and PostgreSQL applies them to
// every later session on that database, superusers' included: `role` makes a superuser's session
// run as the tenant's role, `statement_timeout = '1ms'` makes pg_dump or a maintenance statement
// fail, `default_transaction_read_only` makes writes fail. Settings sent in the connection's startup
// packet (libpq's `options`, PGOPTIONS) take precedence over database and role settings, so svc
// sends its own for each of them on every connection (node-pg's `options`, PGOPTIONS for pg_dump
// and pg_restore).

/** Each `name=value` is one `-c`; values hold no space (the startup option's separator). */
const PINNED: readonly (readonly [string, string])[] = [
  ['role', 'none'],
  ['statement_timeout', '0'],
  ['lock_timeout', '0'],
  ['idle_in_transaction_session_timeout', '0'],
  ['default_transaction_read_only', 'off'],
  ['default_transaction_deferrable', 'off'],
  ['default_transaction_isolation', 'read\\ committed'],
  ['exit_on_error', 'off'],
  ['search_path', 'pg_catalog,pg_temp'],
  ['standard_conforming_strings', 'on'],
  ['DateStyle', 'ISO,MDY'],
  ['IntervalStyle', 'postgres'],
];

/** Settings newer than PostgreSQL 12: naming one a server does not know fails the connection. */
const SINCE: readonly (readonly [number, string, string])[] = [
  [14, 'idle_session_timeout', '0'],
  [17, 'transaction_timeout', '0'],
];

/** The major version of each server seen (by host and port), from its startup answer (server_version). */
const majors = new Map<string, number>();
const key = (host: string, port: number) => `${host}:${port}`;

/** Records the server's version from its `server_version` parameter (e.g. "15.20 (Debian …)"). */
export function noteServerVersion(host: string, port: number, serverVersion: string): void {
  const major = Number.parseInt(serverVersion, 10);
  if (Number.isInteger(major)) majors.set(key(host, port), major);
}

/** The newer settings the server at host:port has, or null while its version is not known. */
export function newerSettings(host: string, port: number): (readonly [string, string])[] | null {
  const major = majors.get(key(host, port));
  return major === undefined ? null : SINCE.filter(([since]) => major >= since).map(([, name, value]) => [name, value] as const);
}

/**
 * The startup options (`-c name=value …`) for a session on the server at host:port: the pinned
 * settings, and the newer ones once the server's version is known (svc's first connection to a
 * server is its maintenance database, which no tenant owns).
 */
export function sessionOptions(host: string, port: number): string {
  return [...PINNED, ...(newerSettings(host, port) ?? [])].map(([name, value]) => `-c ${name}=${value}`).join(' ');
}
