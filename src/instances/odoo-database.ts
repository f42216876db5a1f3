// What the service changes inside a customer's Odoo database, as Odoo's own database duplication
// and click-odoo-copydb do: a new identity (database.secret signs Odoo's tokens, database.uuid keys
// its paid services, so no two tenants may share them), the customer's login on the template's
// administrator, and the package limits as config parameters a module inside the instance reads.
// Each function is one transaction on a connection to that database.
import { randomUUID } from 'node:crypto';
import { UserError } from '../core/errors.js';
import { hashOdooPassword } from './odoo-password.js';
import { lockTenantTables, type LockMode, type Query } from './tenant-session.js';

export type { Query };

/** The tables and columns of Odoo's models that the service reads or writes. */
export const ODOO_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  ir_config_parameter: ['key', 'value'],
  ir_model_data: ['module', 'name', 'model', 'res_id'],
  res_users: ['id', 'login', 'password', 'partner_id', 'active', 'share'],
  res_partner: ['id', 'name', 'email'],
  res_company: ['id', 'name', 'partner_id'],
};

/** The tables each kind of change uses. */
const PARAMS = ['ir_config_parameter'] as const;
const LOGIN_TABLES = ['ir_model_data', 'res_users', 'res_partner', 'res_company', 'ir_config_parameter'] as const;

/**
 * What signs a user in besides the password, in Odoo 18 and 19 (and the auth_totp, auth_oauth and
 * auth_signup modules when installed). A copy of a template keeps them, so a key or token made on
 * the template would open every customer's instance: every API key (whoever made it) and the
 * second-factor devices go; the administrator who becomes the customer loses its devices (session
 * identifiers), second-factor secret, OAuth token and signup token.
 */
const CREDENTIAL_TABLES = ['res_users_apikeys', 'auth_totp_device', 'res_device_log'] as const;
const ADMIN_USER_CREDENTIALS = ['totp_secret', 'oauth_access_token'] as const;
const ADMIN_PARTNER_CREDENTIALS = ['signup_token', 'signup_type', 'signup_expiration'] as const;

interface Credentials {
  tables: string[];
  userColumns: string[];
  partnerColumns: string[];
}

/** Which of the credential tables and columns this database has. */
async function credentialsPresent(query: Query): Promise<Credentials> {
  const { rows } = await query(
    `SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
      WHERE table_schema = 'public' AND (table_name = ANY($1::text[])
         OR (table_name = 'res_users' AND column_name = ANY($2::text[]))
         OR (table_name = 'res_partner' AND column_name = ANY($3::text[])))`,
    [CREDENTIAL_TABLES, ADMIN_USER_CREDENTIALS, ADMIN_PARTNER_CREDENTIALS],
  );
  const columnsOf = (table: string) => rows.filter((r) => r.t === table).map((r) => String(r.c));
  return {
    tables: CREDENTIAL_TABLES.filter((t) => rows.some((r) => r.t === t)),
    userColumns: columnsOf('res_users').filter((c) => (ADMIN_USER_CREDENTIALS as readonly string[]).includes(c)),
    partnerColumns: columnsOf('res_partner').filter((c) => (ADMIN_PARTNER_CREDENTIALS as readonly string[]).includes(c)),
  };
}

async function removeTemplateCredentials(query: Query, present: Credentials, admin: { id: number; partner_id: number }) {
  for (const table of present.tables) {
    if (table === 'res_device_log') await query('DELETE FROM public.res_device_log WHERE user_id = $1', [admin.id]);
    else await query(`DELETE FROM public.${table}`);
  }
  const cleared = (columns: string[]) => columns.map((c) => `${c} = NULL`).join(', ');
  if (present.userColumns.length > 0) await query(`UPDATE public.res_users SET ${cleared(present.userColumns)} WHERE id = $1`, [admin.id]);
  if (present.partnerColumns.length > 0) {
    await query(`UPDATE public.res_partner SET ${cleared(present.partnerColumns)} WHERE id = $1`, [admin.partner_id]);
  }
}

/** "YYYY-MM-DD HH:MM:SS" in UTC, as Odoo writes datetimes. */
export const odooDatetime = (d: Date) => d.toISOString().slice(0, 19).replace('T', ' ');

/** A UserError naming every missing table and column, so a template can be mended in one go. */
export async function assertOdooDatabase(query: Query, what: string): Promise<void> {
  const { rows } = await query(
    `SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
      WHERE table_schema = 'public' AND table_name = ANY($1::text[])`,
    [Object.keys(ODOO_COLUMNS)],
  );
  const present = new Set(rows.map((r) => `${r.t}.${r.c}`));
  const tables = new Set(rows.map((r) => String(r.t)));
  const missing = Object.entries(ODOO_COLUMNS).flatMap(([table, columns]) =>
    tables.has(table) ? columns.filter((c) => !present.has(`${table}.${c}`)).map((c) => `column ${table}.${c}`) : [`table ${table}`],
  );
  if (missing.length > 0) throw new UserError(`${what} is not an Odoo database the service can set up: missing ${missing.join(', ')}`);
}

/**
 * One transaction that first locks the tables it uses and checks they are Odoo's plain tables (see
 * tenant-session.ts): tenant code never runs in it, and what it reads is not a view's forgery.
 */
async function transaction<T>(
  query: Query,
  tables: readonly string[],
  work: () => Promise<T>,
  mode: LockMode = 'ROW EXCLUSIVE',
): Promise<T> {
  await query('BEGIN');
  try {
    await lockTenantTables(query, tables, mode);
    const result = await work();
    await query('COMMIT');
    return result;
  } catch (err) {
    // The error that failed the transaction is the one told; a ROLLBACK that fails too means the
    // connection is gone, and the transaction with it.
    await query('ROLLBACK').catch(() => {});
    throw err;
  }
}

/** Sets config parameters (null removes one), as ir.config_parameter's set_param does. */
async function setParams(query: Query, params: Record<string, string | null>) {
  for (const [key, value] of Object.entries(params)) {
    if (value === null) {
      await query('DELETE FROM public.ir_config_parameter WHERE key = $1', [key]);
      continue;
    }
    await query(
      `WITH updated AS (UPDATE public.ir_config_parameter SET value = $2 WHERE key = $1 RETURNING 1)
       INSERT INTO public.ir_config_parameter (key, value) SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM updated)`,
      [key, value],
    );
  }
}

/**
 * A new identity: secret, uuid and creation date of its own, the enterprise contract and its
 * expiry removed, and (when known) the address the instance is reached at.
 */
export function setIdentity(query: Query, opts: { url: string | null; now?: Date }) {
  return transaction(query, PARAMS, () =>
    setParams(query, {
      'database.secret': randomUUID(),
      'database.uuid': randomUUID(),
      'database.create_date': odooDatetime(opts.now ?? new Date()),
      'database.enterprise_code': null,
      'database.expiration_date': null,
      'database.expiration_reason': null,
      ...(opts.url ? baseUrlParams(opts.url) : {}),
    }),
  );
}

/**
 * web.base.url, frozen: the service owns the address (customer domains move it), and Odoo would
 * otherwise rewrite it to wherever an administrator first signs in from.
 */
const baseUrlParams = (url: string) => ({ 'web.base.url': url, 'web.base.url.freeze': 'True' });

/** The address the instance is reached at (a customer domain, or SUBSCRIPTION_URL's). */
export function setBaseUrl(query: Query, url: string) {
  return transaction(query, PARAMS, () => setParams(query, baseUrlParams(url)));
}

/** A standby handed to a customer: its address and a creation date of today. */
export function setAddressAndDate(query: Query, url: string, now = new Date()) {
  return transaction(query, PARAMS, () => setParams(query, { ...baseUrlParams(url), 'database.create_date': odooDatetime(now) }));
}

export interface PackageLimits {
  id: number;
  is_trial: boolean;
  trial_end_date: Date | null;
  user_limit: number;
  storage_limit_gb: number;
  model_limits: unknown;
}

/**
 * The package as config parameters (svc.*) svc's addon inside the instance enforces. `contact` (the
 * support_contact setting) becomes svc.contact, which its messages name; undefined leaves it alone.
 */
export function packageParams(sub: PackageLimits, contact?: string | null): Record<string, string | null> {
  return {
    ...(contact !== undefined ? { 'svc.contact': contact } : {}),
    'svc.subscription_id': String(sub.id),
    'svc.is_trial': sub.is_trial ? 'True' : 'False',
    'svc.trial_end_date': sub.is_trial && sub.trial_end_date ? odooDatetime(sub.trial_end_date) : null,
    'svc.user_limit': String(sub.user_limit),
    'svc.storage_limit_gb': String(sub.storage_limit_gb),
    'svc.model_limits': JSON.stringify(sub.model_limits ?? {}),
  };
}

export function setPackageLimits(query: Query, sub: PackageLimits, contact?: string | null) {
  return transaction(query, PARAMS, () => setParams(query, packageParams(sub, contact)));
}

/**
 * The usage round's writes, inside the caller's transaction, on ir_config_parameter locked and
 * checked first: svc.storage_used_bytes set to `storageUsed` (null: left alone), and the package
 * parameters found changed inside the instance put back (`expected`: as svc last wrote them; null:
 * not checked) — its addon refuses the ORM, so that is a tenant's SQL, or a hand edit. One read of
 * them all; a value already right is not written (an unchanged instance's round writes nothing).
 * Answers the package parameters found changed: key → the value found (null: missing).
 */
export async function writeRoundParams(
  query: Query,
  storageUsed: number | null,
  expected: Record<string, string | null> | null,
): Promise<Record<string, string | null>> {
  const wanted: Record<string, string | null> = { ...expected };
  if (storageUsed !== null) wanted['svc.storage_used_bytes'] = String(Math.round(storageUsed));
  const keys = Object.keys(wanted);
  if (keys.length === 0) return {};
  await lockTenantTables(query, PARAMS, 'ROW EXCLUSIVE');
  const { rows } = await query('SELECT key, value FROM public.ir_config_parameter WHERE key = ANY($1::text[])', [keys]);
  const found = new Map(rows.map((r) => [String(r.key), r.value === null ? null : String(r.value)]));
  const differs = keys.filter((k) => (found.get(k) ?? null) !== wanted[k]);
  if (differs.length > 0) await setParams(query, Object.fromEntries(differs.map((k) => [k, wanted[k]!])));
  return Object.fromEntries(differs.filter((k) => expected && k in expected).map((k) => [k, found.get(k) ?? null]));
}

/** What a suspended instance's page says: why, and whom to contact. */
export interface Suspension {
  reason: string;
  contact: string | null;
}

/** The module table of Odoo, where svc's addon is found installed or not. */
const MODULES = 'ir_module_module';
export const SVC_ADDON = 'svc_instance';

/**
 * Marks the instance suspended (svc.suspended, svc.suspension_reason, svc.contact), or lifts the
 * mark (null), when svc's addon is installed in it: the addon then answers every request with the
 * suspension page and every RPC with an error. Answers whether it is installed (false: nothing
 * written, the caller closes the database instead).
 */
export async function setSuspension(query: Query, suspension: Suspension | null): Promise<boolean> {
  const { rows } = await query(
    `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relname = $1`,
    [MODULES],
  );
  if (rows.length === 0) return false;
  return transaction(query, [MODULES, ...PARAMS], async () => {
    const installed = await query(`SELECT 1 FROM public.${MODULES} WHERE name = $1 AND state = 'installed'`, [SVC_ADDON]);
    if (installed.rows.length === 0) return false;
    await setParams(
      query,
      suspension
        ? { 'svc.suspended': 'True', 'svc.suspension_reason': suspension.reason, 'svc.contact': suspension.contact }
        : { 'svc.suspended': null, 'svc.suspension_reason': null },
    );
    return true;
  });
}

/**
 * svc.storage_used_bytes: the storage the usage round measured (database and filestore), which svc's
 * addon in the instance compares with svc.storage_limit_gb before it stores a new file.
 */
export function setStorageUsed(query: Query, bytes: number) {
  return transaction(query, PARAMS, () => setParams(query, { 'svc.storage_used_bytes': String(Math.round(bytes)) }));
}

/** The administrator Odoo made at install (base.user_admin), else the user with id 2 as in every Odoo database. */
async function administrator(query: Query): Promise<{ id: number; partner_id: number }> {
  const { rows } = await query(
    `SELECT u.id, u.partner_id FROM public.res_users u
      WHERE u.id = COALESCE((SELECT res_id FROM public.ir_model_data WHERE module = 'base' AND name = 'user_admin' AND model = 'res.users'), 2)`,
  );
  const row = rows[0] as { id: number; partner_id: number } | undefined;
  if (!row) throw new UserError('The database has no administrator (base.user_admin, or res_users id 2)');
  return row;
}

export interface Customer {
  email: string;
  name: string;
  companyName: string;
  /** The hash of the customer's password (hashOdooPassword: svc's random passwords need no stretching). */
  passwordHash: string;
}

/**
 * The template's administrator becomes the customer: login = e-mail, the customer's name and
 * e-mail on its partner, the company named, a password of the customer's own (its hash), and
 * nothing else of the template that signs anybody in (API keys, devices, second factor, tokens).
 */
export async function setCustomerLogin(query: Query, customer: Customer): Promise<{ uid: number }> {
  const credentials = await credentialsPresent(query);
  return transaction(query, [...LOGIN_TABLES, ...credentials.tables], async () => {
    const admin = await administrator(query);
    await query('UPDATE public.res_users SET login = $1, password = $2 WHERE id = $3', [customer.email, customer.passwordHash, admin.id]);
    await query('UPDATE public.res_partner SET name = $1, email = $2 WHERE id = $3', [customer.name, customer.email, admin.partner_id]);
    await removeTemplateCredentials(query, credentials, admin);
    // Odoo's company name is its partner's (a related, stored field): both are set.
    const { rows } = await query('UPDATE public.res_company SET name = $1 WHERE id = 1 RETURNING partner_id', [customer.companyName]);
    const companyPartner = rows[0]?.partner_id as number | undefined;
    if (companyPartner !== undefined && companyPartner !== admin.partner_id) {
      await query('UPDATE public.res_partner SET name = $1 WHERE id = $2', [customer.companyName, companyPartner]);
    }
    return { uid: admin.id };
  });
}

/** A new password on the customer's login (a ready mail sent again tells a new one); answers that user and its login. */
export async function setCustomerPassword(query: Query, password: string): Promise<{ uid: number; login: string }> {
  const hash = await hashOdooPassword(password);
  return transaction(query, LOGIN_TABLES, async () => {
    const admin = await administrator(query);
    const { rows } = await query('UPDATE public.res_users SET password = $1 WHERE id = $2 RETURNING login', [hash, admin.id]);
    return { uid: admin.id, login: String(rows[0]?.login) };
  });
}
