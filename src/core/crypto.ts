// Envelope encryption of stored secrets. The master key (a file, 0600, created on first
// start) wraps versioned AES-256-GCM data keys kept in `encryption_keys`; each ciphertext is
// `v<version>:<base64(iv | tag | ciphertext)>`, so it names the data key that can open it.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Db, DbTx } from './db.js';

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const CIPHERTEXT = /^v(\d+):([A-Za-z0-9+/=]+)$/;
// Serialises creation of the first data key between processes.
const FIRST_KEY_LOCK = 7_356_201_002;

function seal(key: Buffer, plaintext: Buffer): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function open(key: Buffer, sealed: string): Buffer {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
}

/** Reads the master key file, creating it (mode 0600) when missing: the spec's post-install step. */
export async function loadOrCreateMasterKey(file: string): Promise<Buffer> {
  try {
    return parseMasterKey(await readFile(file, 'utf8'), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(path.dirname(path.resolve(file)), { recursive: true });
  const key = randomBytes(KEY_BYTES);
  try {
    // 'wx': when several processes start at once, exactly one creates the file.
    await writeFile(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return parseMasterKey(await readFile(file, 'utf8'), file);
  }
}

function parseMasterKey(text: string, file: string): Buffer {
  const hex = text.trim();
  if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error(`${file} is not a master key (64 hex characters)`);
  return Buffer.from(hex, 'hex');
}

export function keyVersionOf(ciphertext: string): number {
  const match = CIPHERTEXT.exec(ciphertext);
  if (!match) throw new Error('Not a ciphertext of svc');
  return Number(match[1]);
}

export type SecretBox = ReturnType<typeof createSecretBox>;

export function createSecretBox(db: Db, masterKey: Buffer) {
  const dataKeys = new Map<number, Buffer>(); // version → key; a version's key never changes

  async function dataKey(version: number, tx: DbTx | Db = db): Promise<Buffer> {
    const cached = dataKeys.get(version);
    if (cached) return cached;
    const row = await tx.encryptionKey.findUnique({ where: { version } });
    if (!row) throw new Error(`Encryption key v${version} is missing`);
    const key = open(masterKey, row.wrapped_key);
    dataKeys.set(version, key);
    return key;
  }

  /** Creates a new data key and makes it the active one. */
  async function createKey(tx: DbTx | Db = db): Promise<number> {
    const key = randomBytes(KEY_BYTES);
    const row = await tx.encryptionKey.create({ data: { wrapped_key: seal(masterKey, key) } });
    dataKeys.set(row.version, key);
    return row.version;
  }

  /** The newest active data key, created on first use. Read each time: another process may rotate. */
  async function activeVersion(): Promise<number> {
    const newest = await db.encryptionKey.findFirst({ where: { state: 'active' }, orderBy: { version: 'desc' } });
    if (newest) return newest.version;
    return db.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${FIRST_KEY_LOCK})`;
      const again = await tx.encryptionKey.findFirst({ where: { state: 'active' }, orderBy: { version: 'desc' } });
      return again ? again.version : createKey(tx);
    });
  }

  async function encryptWith(version: number, plaintext: string): Promise<string> {
    return `v${version}:${seal(await dataKey(version), Buffer.from(plaintext, 'utf8'))}`;
  }

  return {
    async encrypt(plaintext: string): Promise<string> {
      return encryptWith(await activeVersion(), plaintext);
    },
    async decrypt(ciphertext: string): Promise<string> {
      const match = CIPHERTEXT.exec(ciphertext);
      if (!match) throw new Error('Not a ciphertext of svc');
      return open(await dataKey(Number(match[1])), match[2]!).toString('utf8');
    },
    /** Decrypts a nullable column. */
    async reveal(ciphertext: string | null | undefined): Promise<string | null> {
      return ciphertext ? this.decrypt(ciphertext) : null;
    },
    encryptWith,
    createKey,
    activeVersion,
    /**
     * A 32-byte key for one purpose (e.g. signing form tokens), derived from the master key with
     * HKDF-SHA256: every process sharing the master key file derives the same key.
     */
    deriveKey(purpose: string): Buffer {
      return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), `svc:${purpose}`, KEY_BYTES));
    },
  };
}
