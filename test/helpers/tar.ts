// Hand-made tar archives for hostile-tarball tests: every header field as the test says, so an
// entry can carry what no honest archiver writes (`top//tmp/x`, a ustar prefix ending where the
// name starts with `/`, a pax `path` overriding an innocent name, a hard link out of the tree).
import { gzipSync } from 'node:zlib';

export interface TarEntry {
  /** The header's name field (at most 100 bytes). */
  name: string;
  /** '0' file (default), '1' hard link, '2' symlink, '3' character device, '5' directory, '6' FIFO, 'x'/'g' pax headers… */
  type?: string;
  data?: string | Buffer;
  linkname?: string;
  /** The ustar prefix field (at most 155 bytes), joined to the name with a `/` by readers. */
  prefix?: string;
  /** The size field, when it should differ from the data's length. */
  size?: number;
  /** Written as a pax extended header (`x`) just before this entry. */
  pax?: Record<string, string>;
  /** Spoils the header checksum. */
  badChecksum?: boolean;
}

const BLOCK = 512;
const pad = (n: number) => (BLOCK - (n % BLOCK)) % BLOCK;

function field(buf: Buffer, offset: number, length: number, value: string) {
  const bytes = Buffer.from(value);
  if (bytes.length > length) throw new Error(`tar helper: ${JSON.stringify(value)} does not fit ${length} bytes`);
  bytes.copy(buf, offset);
}
const octal = (n: number, width: number) => `${n.toString(8).padStart(width - 1, '0')}\0`;

/** A pax record: `<length> <key>=<value>\n`, the length counting itself. */
export function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body) + 1;
  while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
  return `${len}${body}`;
}

function header(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  field(h, 0, 100, e.name);
  field(h, 100, 8, octal(e.type === '5' ? 0o755 : 0o644, 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(e.size ?? size, 12));
  field(h, 136, 12, octal(1_700_000_000, 12));
  h[156] = (e.type ?? '0').charCodeAt(0);
  field(h, 157, 100, e.linkname ?? '');
  field(h, 257, 8, 'ustar\x0000');
  field(h, 265, 32, 'root');
  field(h, 297, 32, 'root');
  field(h, 345, 155, e.prefix ?? '');
  h.fill(' ', 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  field(h, 148, 8, `${(e.badChecksum ? sum + 1 : sum).toString(8).padStart(6, '0')}\0 `);
  return h;
}

/** The blocks of one entry (with its pax header first, if any). */
export function tarEntry(e: TarEntry): Buffer {
  const data = Buffer.from(e.data ?? '');
  const parts: Buffer[] = [];
  if (e.pax) {
    const records = Buffer.from(
      Object.entries(e.pax)
        .map(([k, v]) => paxRecord(k, v))
        .join(''),
    );
    parts.push(header({ name: 'PaxHeaders/entry', type: 'x' }, records.length), records, Buffer.alloc(pad(records.length)));
  }
  parts.push(header(e, data.length), data, Buffer.alloc(pad(data.length)));
  return Buffer.concat(parts);
}

/** A whole archive (entries, then the two zero blocks), gzipped unless told otherwise. */
export function tarball(entries: TarEntry[], opts: { gzip?: boolean } = {}): Buffer {
  const tar = Buffer.concat([...entries.map(tarEntry), Buffer.alloc(2 * BLOCK)]);
  return opts.gzip === false ? tar : gzipSync(tar);
}
