// Reads the tar headers of a deploy tarball as it streams past, and refuses the first entry that
// would not land inside the release directory once the root server's
// `tar -x --strip-components=1` unpacks it. GNU tar removes leading slashes, and only then strips
// the top directory: `top//etc/x` (or a pax path, or a ustar prefix ending where the name starts
// with `/`) becomes `/etc/x`, written there — as root when the deploy runs through sudo. So the
// path is computed as GNU tar computes it, and refused when it is absolute or has a `..`.
// A git tree holds files, directories and symlinks only: any other entry (a hard link, a device, a
// FIFO, GNU long names, sparse files) is refused too, and so is any header this reader does not
// understand exactly as GNU tar would (a bad checksum, an unusual number, an unknown pax
// keyword): what is refused cannot be read differently by the two.
// A symlink must point inside the release too: its target is refused when absolute, or when its
// `..` components, from the link's own directory, climb above the release. The kernel follows links
// inside a target and inside the link's own path, so where that text leads is only where the link
// leads if neither holds another link before a climb: a `..` after a name is refused (`loop/..`
// reads as the link's directory, but with `loop -> .` it is the one above), and so is a symlink
// whose path runs through an earlier one (GNU tar places it wherever that one points). With every
// link inside, writing through one (GNU tar follows those it made) stays inside as well.
import { UserError } from '../core/errors.js';

const BLOCK = 512;
/** Bounds the pax header kept in memory (git writes a record or two). */
const MAX_PAX_BYTES = 64 * 1024;
const FILE = new Set(['0', '\0']);
const KINDS: Record<string, string> = {
  '1': 'a hard link',
  '3': 'a character device',
  '4': 'a block device',
  '6': 'a FIFO',
  '7': 'a contiguous file',
  L: 'a GNU long name',
  K: 'a GNU long link name',
  S: 'a sparse file',
};
/** Bounds the symlink paths kept to find one placed through another (each counted with 64 bytes for its slot). */
const MAX_SYMLINK_BYTES = 16 * 1024 * 1024;
/** Pax keywords that change nothing about where or how much is written. */
const INERT_PAX = new Set(['mtime', 'atime', 'ctime', 'uid', 'gid', 'uname', 'gname', 'comment']);

const cString = (buf: Buffer) => {
  const end = buf.indexOf(0);
  return buf.subarray(0, end < 0 ? buf.length : end).toString('utf8');
};

/** An octal header number as GNU tar reads it; anything else (base-256, blanks) is refused. */
function octal(buf: Buffer): number | null {
  const m = /^ *([0-7]+)[ \0]*$/.exec(buf.toString('latin1'));
  return m ? Number.parseInt(m[1]!, 8) : null;
}

/** `<length> <key>=<value>\n` records, strictly; null when any is malformed. */
function paxRecords(data: Buffer): Map<string, string> | null {
  const out = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const digits = data.subarray(at, space).toString('latin1');
    const len = Number(digits);
    if (space < 0 || !/^[1-9][0-9]*$/.test(digits) || at + len > data.length || data[at + len - 1] !== 0x0a) return null;
    const record = data.subarray(space + 1, at + len - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) return null;
    out.set(record.subarray(0, eq).toString('utf8'), record.subarray(eq + 1).toString('utf8'));
    at += len;
  }
  return out;
}

/** Where GNU tar puts an entry under --strip-components=1, relative to -C; '' when it skips it. */
export function afterTopDirectory(name: string): string {
  // Trailing slashes go first, then leading ones (tar: "Removing leading `/' from member names").
  const rest = name.replace(/\/+$/, '').replace(/^\/+/, '');
  const slash = rest.indexOf('/');
  return slash < 0 ? '' : rest.slice(slash + 1); // one slash only: `top//x` leaves `/x`
}

/** The components the kernel walks: empty and `.` ones change nothing. */
const components = (p: string) => p.split('/').filter((c) => c !== '' && c !== '.');

/**
 * Why a symlink at `at` (its path in the release) to `target` would point outside the release, read
 * from the text alone (`which …`); null when it stays inside. `..` components may only lead.
 */
export function symlinkTargetLeaves(at: string, target: string): string | null {
  if (target.startsWith('/')) return 'is an absolute path';
  const parts = components(target);
  const firstName = parts.findIndex((c) => c !== '..');
  if (firstName >= 0 && parts.slice(firstName).includes('..')) {
    return 'has a ".." after a name (that name could be a symlink, and the climb would start wherever it points)';
  }
  const climbs = firstName < 0 ? parts.length : firstName;
  return climbs > components(at).length - 1 ? 'leaves the release directory' : null;
}

/**
 * A checker fed the inflated tarball, chunk by chunk; throws a UserError at the first entry that is
 * refused (or header that is not understood). Bytes after the end-of-archive block are ignored,
 * as GNU tar ignores them.
 */
export function createTarEntryCheck(what: string): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let skip = 0;
  let ended = false;
  /** The pax header being read: its type and size, once its header block is read. */
  let paxHeader: { type: string; size: number } | null = null;
  /** The records of the `x` header just read; they apply to the next entry. */
  let pax: Map<string, string> | null = null;
  let offset = 0;
  /** The symlinks seen so far, by their path in the release. */
  const symlinks = new Set<string>();
  let symlinkBytes = 0;

  const refuse = (entry: string, why: string) =>
    new UserError(`${what} is refused: the entry ${JSON.stringify(entry.slice(0, 300))} ${why}; nothing was deployed`);
  const invalid = (why: string) =>
    new UserError(`${what} is refused: not a tar archive GNU tar reads the same way (${why} at byte ${offset})`);

  function header(h: Buffer) {
    if (h.every((b) => b === 0)) {
      ended = true;
      return;
    }
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!;
    if (octal(h.subarray(148, 156)) !== sum) throw invalid('a header checksum does not match');
    const type = String.fromCharCode(h[156]!);
    const ustar = h.subarray(257, 263).equals(Buffer.from('ustar\0'));
    const prefix = ustar ? cString(h.subarray(345, 500)) : '';
    const headerName = (prefix ? `${prefix}/` : '') + cString(h.subarray(0, 100));
    const size = octal(h.subarray(124, 136));
    if (size === null) throw invalid(`the size of ${JSON.stringify(headerName)} is not an octal number`);

    if (type === 'x' || type === 'g') {
      if (pax) throw invalid('two pax headers in a row');
      if (size > MAX_PAX_BYTES) throw invalid(`a pax header of ${size} bytes`);
      paxHeader = { type, size };
      return;
    }
    const name = pax?.get('path') ?? headerName;
    const linkTarget = pax?.get('linkpath') ?? cString(h.subarray(157, 257));
    const paxSize = pax?.get('size');
    const dataSize =
      paxSize === undefined ? size : /^[0-9]+$/.test(paxSize) && Number.isSafeInteger(Number(paxSize)) ? Number(paxSize) : null;
    pax = null;
    if (KINDS[type]) throw refuse(name, `is ${KINDS[type]} (a git tree holds files, directories and symlinks only)`);
    if (!FILE.has(type) && type !== '5' && type !== '2') throw refuse(name, `has the unknown type ${JSON.stringify(type)}`);
    if (dataSize === null) throw invalid(`the pax size of ${JSON.stringify(name)} is not a number`);
    // A directory or symlink carries no data, nor does a file whose name ends in / (GNU tar makes
    // it a directory): a size there could mean different next headers to different readers.
    if ((!FILE.has(type) || name.endsWith('/')) && dataSize !== 0) throw invalid(`${JSON.stringify(name)} has data but is no file`);
    if (name.split('/').includes('..')) throw refuse(name, 'has a ".." component');
    const unpacked = afterTopDirectory(name);
    if (unpacked.startsWith('/')) {
      throw refuse(
        name,
        `is the absolute path ${JSON.stringify(unpacked.replace(/\/+$/, '').slice(0, 300))} once its top directory is stripped`,
      );
    }
    if (type === '2' && unpacked !== '') symlink(name, unpacked, linkTarget);
    skip = FILE.has(type) ? dataSize + ((BLOCK - (dataSize % BLOCK)) % BLOCK) : 0;
  }

  function symlink(name: string, unpacked: string, target: string) {
    const to = `is a symlink to ${JSON.stringify(target.slice(0, 300))}`;
    const leaves = symlinkTargetLeaves(unpacked, target);
    if (leaves) throw refuse(name, `${to}, which ${leaves}`);
    const at = components(unpacked);
    for (let i = 1; i < at.length; i++) {
      const through = at.slice(0, i).join('/');
      if (symlinks.has(through)) {
        throw refuse(name, `${to} inside the symlink ${JSON.stringify(through.slice(0, 300))} (it would land wherever that one points)`);
      }
    }
    const key = at.join('/');
    symlinkBytes += key.length + 64;
    if (symlinkBytes > MAX_SYMLINK_BYTES) {
      throw new UserError(`${what} is refused: it holds more symlinks than the check keeps track of; nothing was deployed`);
    }
    symlinks.add(key);
  }

  function paxData(type: string, size: number, data: Buffer) {
    const records = paxRecords(data.subarray(0, size));
    if (!records) throw invalid('a malformed pax header');
    for (const [key, value] of records) {
      const applies = INERT_PAX.has(key) || (type === 'x' && (key === 'path' || key === 'linkpath' || key === 'size'));
      if (!applies) throw invalid(`the pax keyword ${JSON.stringify(key)}${type === 'g' ? ' in a global header' : ''}`);
      if (value.includes('\0')) throw invalid(`a NUL in the pax ${key}`);
    }
    if (type === 'x') pax = records;
  }

  return (chunk: Buffer) => {
    let data = chunk;
    while (data.length > 0 && !ended) {
      if (skip > 0) {
        const n = Math.min(skip, data.length);
        skip -= n;
        offset += n;
        data = data.subarray(n);
        continue;
      }
      const reading = paxHeader;
      const need = reading ? reading.size + ((BLOCK - (reading.size % BLOCK)) % BLOCK) : BLOCK;
      const take = Math.min(need - pending.length, data.length);
      pending = Buffer.concat([pending, data.subarray(0, take)]);
      data = data.subarray(take);
      if (pending.length < need) return;
      const unit = pending;
      pending = Buffer.alloc(0);
      if (reading) {
        paxHeader = null;
        paxData(reading.type, reading.size, unit);
      } else {
        header(unit);
      }
      offset += need;
    }
  };
}
