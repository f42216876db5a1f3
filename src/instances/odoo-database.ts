// What the service changes inside a customer's Odoo database, as Odoo's own database duplication
// and click-odoo-copydb do: a new identity (database.secret signs Odoo's tokens, database.uuid keys
// its paid services, so no two tenants may share them), the customer's login on the template's
// administrator, and the package limits as config parameters a module inside the instance reads.
// Each function is one transaction on a connection to that database.
import { randomUUID } from 'node:crypto';
import { UserError } from '../core/errors.js';
import { hashOdooPassword, ODOO_DEFAULT_ROUNDS } from './odoo-password.js';

export type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

/** The tables and columns of Odoo's models that the service reads or writes. */
export const ODOO_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  ir_config_parameter: ['key', 'value'],
  ir_model_data: ['module', 'name', 'model', 'res_id'],
  res_users: ['id', 'login', 'password', 'partner_id', 'active', 'share'],
  res_partner: ['id', 'name', 'email'],
  res_company: ['id', 'name', 'partner_id'],
};

/** "YYYY-MM-DD HH:MM:SS" in UTC, as Odoo writes datetimes. */
export const odooDatetime = (d: Date) => d.toISOString().slice(0, 19).replace('T', ' ');

/** A UserError naming every missing table and column, so a template can be mended in one go. */
export async function assertOdooDatabase(query: Query, what: string): Promise<void> {
  const { rows } = await query(
    `SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ANY($1::text[])`,
    [Object.keys(ODOO_COLUMNS)],
  );
  const present = new Set(rows.map((r) => `${r.t}.${r.c}`));
  const tables = new Set(rows.map((r) => String(r.t)));
  const missing = Object.entries(ODOO_COLUMNS).flatMap(([table, columns]) =>
    tables.has(table) ? columns.filter((c) => !present.has(`${table}.${c}`)).map((c) => `column ${table}.${c}`) : [`table ${table}`],
  );
  if (missing.length > 0) throw new UserError(`${what} is not an Odoo database the service can set up: missing ${missing.join(', ')}`);
}

async function transaction<T>(query: Query, work: () => Promise<T>): Promise<T> {
  await query('BEGIN');
  try {
    const result = await work();
    await query('COMMIT');
    return result;
  } catch (err) {
    await query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** Sets config parameters (null removes one), as ir.config_parameter's set_param does. */
async function setParams(query: Query, params: Record<string, string | null>) {
  for (const [key, value] of Object.entries(params)) {
    if (value === null) {
      await query('DELETE FROM ir_config_parameter WHERE key = $1', [key]);
      continue;
    }
    await query(
      `WITH updated AS (UPDATE ir_config_parameter SET value = $2 WHERE key = $1 RETURNING 1)
       INSERT INTO ir_config_parameter (key, value) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM updated)`,
      [key, value],
    );
  }
}

/**
 * A new identity: secret, uuid and creation date of its own, the enterprise contract and its
 * expiry removed, and (when known) the address the instance is reached at.
 */
export function setIdentity(query: Query, opts: { url: string | null; now?: Date }) {
  return transaction(query, () =>
    setParams(query, {
      'database.secret': randomUUID(),
      'database.uuid': randomUUID(),
      'database.create_date': odooDatetime(opts.now ?? new Date()),
      'database.enterprise_code': null,
      'database.expiration_date': null,
      'database.expiration_reason': null,
      ...(opts.url ? { 'web.base.url': opts.url } : {}),
    }),
  );
}

/** The address the instance is reached at (a customer domain, or SUBSCRIPTION_URL's). */
export function setBaseUrl(query: Query, url: string) {
  return transaction(query, () => setParams(query, { 'web.base.url': url }));
}

/** A standby handed to a customer: its address and a creation date of today. */
export function setAddressAndDate(query: Query, url: string, now = new Date()) {
  return transaction(query, () => setParams(query, { 'web.base.url': url, 'database.create_date': odooDatetime(now) }));
}

export interface PackageLimits {
  id: number;
  is_trial: boolean;
  trial_end_date: Date | null;
  user_limit: number;
  storage_limit_gb: number;
  model_limits: unknown;
}

/** The package as config parameters (svc.*) a module inside the instance can enforce. */
export function packageParams(sub: PackageLimits): Record<string, string | null> {
  return {
    'svc.subscription_id': String(sub.id),
    'svc.is_trial': sub.is_trial ? 'True' : 'False',
    'svc.trial_end_date': sub.is_trial && sub.trial_end_date ? odooDatetime(sub.trial_end_date) : null,
    'svc.user_limit': String(sub.user_limit),
    'svc.storage_limit_gb': String(sub.storage_limit_gb),
    'svc.model_limits': JSON.stringify(sub.model_limits ?? {}),
  };
}

export function setPackageLimits(query: Query, sub: PackageLimits) {
  return transaction(query, () => setParams(query, packageParams(sub)));
}

/** The administrator Odoo made at install (base.user_admin), else the user with id 2 as in every Odoo database. */
async function administrator(query: Query): Promise<{ id: number; partner_id: number }> {
  const { rows } = await query(
    `SELECT u.id, u.partner_id FROM res_users u
      WHERE u.id = COALESCE((SELECT res_id FROM ir_model_data WHERE module = 'base' AND name = 'user_admin' AND model = 'res.users'), 2)`,
  );
  const row = rows[0] as { id: number; partner_id: number } | undefined;
  if (!row) throw new UserError('The database has no administrator (base.user_admin, or res_users id 2)');
  return row;
}

/** The rounds the instance hashes with (password.hashing.rounds), else Odoo's default. */
export async function hashingRounds(query: Query): Promise<number> {
  const { rows } = await query(`SELECT value FROM ir_config_parameter WHERE key = 'password.hashing.rounds'`);
  const rounds = Number(rows[0]?.value);
  return Number.isInteger(rounds) && rounds >= 1000 && rounds <= 10_000_000 ? rounds : ODOO_DEFAULT_ROUNDS;
}

export interface Customer {
  email: string;
  name: string;
  companyName: string;
  /** The hash of the customer's password, made with the instance's hashingRounds(). */
  passwordHash: string;
}

/**
 * The template's administrator becomes the customer: login = e-mail, the customer's name and
 * e-mail on its partner, the company named, and a password of the customer's own (its hash).
 */
export async function setCustomerLogin(query: Query, customer: Customer): Promise<void> {
  await transaction(query, async () => {
    const admin = await administrator(query);
    await query('UPDATE res_users SET login = $1, password = $2 WHERE id = $3', [customer.email, customer.passwordHash, admin.id]);
    await query('UPDATE res_partner SET name = $1, email = $2 WHERE id = $3', [customer.name, customer.email, admin.partner_id]);
    // Odoo's company name is its partner's (a related, stored field): both are set.
    const { rows } = await query('UPDATE res_company SET name = $1 WHERE id = 1 RETURNING partner_id', [customer.companyName]);
    const companyPartner = rows[0]?.partner_id as number | undefined;
    if (companyPartner !== undefined && companyPartner !== admin.partner_id) {
      await query('UPDATE res_partner SET name = $1 WHERE id = $2', [customer.companyName, companyPartner]);
    }
  });
}

/** A new password on the customer's login (a ready mail sent again tells a new one). */
export async function setCustomerPassword(query: Query, password: string): Promise<void> {
  const hash = await hashOdooPassword(password, await hashingRounds(query));
  await transaction(query, async () => {
    const admin = await administrator(query);
    await query('UPDATE res_users SET password = $1 WHERE id = $2', [hash, admin.id]);
  });
}
