// The safety copy svc makes of a database before Odoo updates it, and puts back when the update
// fails: a tenant in a rollout, a database template's `update`, a staging copy's refresh. The
// database is copied with CREATE DATABASE … TEMPLATE (its sessions ended first: Odoo reconnects),
// owned by the original's owner; the filestore beside it with hard links (Odoo never changes a
// stored file in place), a plain copy where the file system refuses. Putting it back: the updated
// database goes and the copy takes its name, so the database is known by the copy's oid from then
// on (the caller records it); the filestore copy replaces the filestore. Every step is idempotent:
// a job resumed after a crash runs it again. The filestore's part is filestore.ts's.
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../core/crypto.js';
import { UserError } from '../core/errors.js';
import { findDatabase, type PostgresqlServerRecord, quoteIdent } from '../postgresql/index.js';
import { createDatabaseFrom, onServer } from './instance-database.js';
import { databaseOwner } from './tenant-session.js';

/**
 * A safety copy's name (its database and filestore directory): the oid of the database it copies
 * (unique on its PostgreSQL server, whoever else uses it) or another tag, and a random part.
 */
export const safetyCopyName = (tag: bigint | string) => `svcrb_${tag}_${randomBytes(4).toString('hex')}`;

/** The safety copy of `database`, owned by its owner, reachable by nobody else; answers the copy's oid. */
export async function makeSafetyCopy(secretBox: SecretBox, pg: PostgresqlServerRecord, database: string, copy: string): Promise<bigint> {
  return onServer(
    secretBox,
    pg,
    async (query) => {
      await query(`DROP DATABASE IF EXISTS ${quoteIdent(copy)} WITH (FORCE)`);
      const owner = await databaseOwner(query, database);
      if (!owner) throw new UserError(`Database ${database} does not exist`);
      await createDatabaseFrom(query, database, copy, owner);
      // As its original: nobody else connects to it (it may take the original's place).
      await query(`REVOKE ALL ON DATABASE ${quoteIdent(copy)} FROM PUBLIC`);
      const found = await findDatabase(query, copy);
      if (!found) throw new UserError(`The safety copy ${copy} was not found after CREATE DATABASE`);
      return BigInt(found.oid);
    },
    { timeout: '15min' },
  );
}

/** A safety copy to put back: the database it was made of, and who that database may be now. */
export interface SafetyCopy {
  database: string;
  copy: string;
  copyOid: bigint | null;
  /** The oid the database had when the copy was made: only that one (or the copy, renamed already) is replaced. */
  databaseOid: bigint | null;
  /** Whose database it is, for the refusal: "the subscription's", "the template's". */
  whose: string;
  /** Run once the updated database is gone, before the copy takes its name (a template records the copy as itself then). */
  beforeRename?: () => Promise<void>;
}

/**
 * Puts the database back from the copy: the database goes (only when it is still the one copied, or
 * the copy renamed already) and the copy takes its name. Idempotent.
 */
export async function restoreSafetyCopy(secretBox: SecretBox, pg: PostgresqlServerRecord, s: SafetyCopy): Promise<void> {
  await onServer(
    secretBox,
    pg,
    async (query) => {
      const saved = await findDatabase(query, s.copy);
      const current = await findDatabase(query, s.database);
      if (saved) {
        if (current && String(current.oid) !== String(s.databaseOid) && String(current.oid) !== String(s.copyOid)) {
          throw new UserError(`Database ${s.database} is no longer ${s.whose} (oid ${current.oid}): it was not restored`);
        }
        if (current) await query(`DROP DATABASE ${quoteIdent(s.database)} WITH (FORCE)`);
        await s.beforeRename?.();
        await query(`ALTER DATABASE ${quoteIdent(s.copy)} RENAME TO ${quoteIdent(s.database)}`);
      } else if (!current || String(current.oid) !== String(s.copyOid)) {
        throw new UserError(`Neither the safety copy ${s.copy} nor the restored database ${s.database} is there`);
      }
    },
    { timeout: '15min' },
  );
}

/** Drops what is left of a safety copy's database. */
export async function dropSafetyCopy(secretBox: SecretBox, pg: PostgresqlServerRecord, copy: string): Promise<void> {
  await onServer(secretBox, pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(copy)} WITH (FORCE)`), { timeout: '15min' });
}
