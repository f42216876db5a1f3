// Rotate Field Encryption Key: a new data key, every stored secret re-encrypted with
// it, and old keys retired only once no ciphertext names them. Each row is rewritten on its own
// (compare-and-set on the old ciphertext), so a crash halfway loses nothing: rows are on the old
// key or the new one, both readable, and a re-run finishes the job. A retired key is no longer
// used to encrypt but stays able to decrypt, so a write that raced the rotation stays readable
// (the next rotation moves it on).
import type { Db } from '../core/db.js';
import type { SecretBox } from '../core/crypto.js';

export interface RotationResult {
  key_version: number;
  reencrypted: number;
  retired_versions: number[];
}

/** Secret columns by table: the models' `secrets` (registry.models.secretColumns()). */
export type SecretColumns = Record<string, readonly string[]>;

export interface RotationOptions {
  batchSize?: number;
  /** Called after each batch; tests use it to simulate a crash halfway. */
  afterBatch?: (done: number) => void | Promise<void>;
}

export async function rotateEncryptionKey(
  deps: { db: Db; secretBox: SecretBox },
  secretColumns: SecretColumns,
  { batchSize = 200, afterBatch }: RotationOptions = {},
): Promise<RotationResult> {
  const { db, secretBox } = deps;
  const version = await secretBox.createKey();
  const prefix = `v${version}:`;
  let reencrypted = 0;

  for (const [table, columns] of Object.entries(secretColumns)) {
    for (const column of columns) {
      for (;;) {
        const rows = await db.$queryRawUnsafe<{ id: number; value: string }[]>(
          `SELECT id, "${column}" AS value FROM "${table}"
           WHERE "${column}" IS NOT NULL AND left("${column}", ${prefix.length}) <> $1
           ORDER BY id LIMIT ${batchSize}`,
          prefix,
        );
        if (rows.length === 0) break;
        for (const row of rows) {
          const next = await secretBox.encryptWith(version, await secretBox.decrypt(row.value));
          reencrypted += await db.$executeRawUnsafe(
            `UPDATE "${table}" SET "${column}" = $1 WHERE id = $2 AND "${column}" = $3`,
            next,
            row.id,
            row.value,
          );
        }
        await afterBatch?.(reencrypted);
      }
    }
  }

  return { key_version: version, reencrypted, retired_versions: await retireUnusedKeys(db, secretColumns, version) };
}

/** Retires every key older than `current` that no stored ciphertext names any more. */
async function retireUnusedKeys(db: Db, secretColumns: SecretColumns, current: number): Promise<number[]> {
  const inUse = new Set<number>([current]);
  for (const [table, columns] of Object.entries(secretColumns)) {
    for (const column of columns) {
      const rows = await db.$queryRawUnsafe<{ value: string }[]>(
        `SELECT DISTINCT split_part("${column}", ':', 1) AS value FROM "${table}" WHERE "${column}" IS NOT NULL`,
      );
      for (const row of rows) inUse.add(Number(row.value.slice(1))); // 'v12' → 12
    }
  }
  const old = await db.encryptionKey.findMany({ where: { state: 'active', version: { lt: current } } });
  const retired = old.map((k) => k.version).filter((v) => !inUse.has(v));
  if (retired.length > 0) {
    await db.encryptionKey.updateMany({
      where: { version: { in: retired } },
      data: { state: 'retired', retired_at: new Date() },
    });
  }
  return retired;
}
