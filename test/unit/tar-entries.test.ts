// The deploy tarball's entry check (src/git/tar-entries.ts) and the stream that applies it
// (src/git/tarball-check.ts), on hand-made archives (test/helpers/tar.ts). Needs no service: the
// deploys themselves are in test/git-tarball.test.ts.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { constants, gzipSync, inflateRawSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { afterTopDirectory, createTarEntryCheck, symlinkTargetLeaves } from '../../src/git/tar-entries.js';
import { checkTarball } from '../../src/git/tarball-check.js';
import { paxRecord, tarball, tarEntry, type TarEntry } from '../helpers/tar.js';

const WHAT = 'The tarball of 0123456789ab';

/** Runs the check over an uncompressed archive in chunks of `size` bytes; the error message, or null. */
function verdict(tar: Buffer, size = tar.length): string | null {
  const check = createTarEntryCheck(WHAT);
  try {
    for (let at = 0; at < tar.length; at += size) check(tar.subarray(at, at + size));
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
const archive = (...entries: TarEntry[]) => tarball(entries, { gzip: false });

describe('afterTopDirectory: where GNU tar --strip-components=1 puts an entry', () => {
  it.each([
    ['top/a/b.py', 'a/b.py'],
    ['top/', ''],
    ['top', ''],
    ['./', ''],
    ['./x', 'x'],
    ['top/./x', './x'],
    ['top//tmp/x', '/tmp/x'],
    ['/top//tmp/x', '/tmp/x'],
    ['///top/x', 'x'],
    ['top//', ''],
    ['top/a//b', 'a//b'],
  ])('%j → %j', (name, expected) => {
    expect(afterTopDirectory(name)).toBe(expected);
  });
});

describe('symlinkTargetLeaves: a symlink to its target, resolved from its own directory', () => {
  it.each([
    ['a/link', '../b'],
    ['a/link', '..'],
    ['a/b/link', '../../c/./d'],
    ['link', 'a/b'],
    ['link', '.'],
    ['a/link', './..//'],
  ])('%j → %j stays inside', (at, target) => {
    expect(symlinkTargetLeaves(at, target)).toBeNull();
  });
  it.each([
    ['a/link', '/etc/passwd', /absolute/],
    ['a/link', '../../x', /leaves the release directory/],
    ['link', '..', /leaves the release directory/],
    ['a//./link', '../../x', /leaves the release directory/],
    ['a/link', 'b/../../x', /a "\.\." after a name/],
    ['a/link', 'b/..', /a "\.\." after a name/],
  ])('%j → %j is refused', (at, target, why) => {
    expect(symlinkTargetLeaves(at, target)).toMatch(why);
  });
});

describe('createTarEntryCheck', () => {
  it('passes a tree of files, directories and symlinks with git’s pax headers, whatever the chunk size', () => {
    const tar = archive(
      { name: 'pax_global_header', type: 'g', data: paxRecord('comment', 'a'.repeat(40)) },
      { name: 'top/', type: '5' },
      { name: 'top/m/a.py', data: randomBytes(3000) },
      { name: 'top/long', data: 'L\n', pax: { path: `top/${'d/'.repeat(80)}x.py`, mtime: '1700000000' } },
      { name: 'top/m/link.py', type: '2', linkname: '../a.py' },
      { name: 'top/m/sub/root', type: '2', linkname: './../..' },
      { name: 'top/m/sub/deep', type: '2', linkname: 'x', pax: { linkpath: `../${'d/'.repeat(80)}x.py` } },
      { name: 'top/./m/dot.py', data: '' },
    );
    for (const size of [1, 7, 511, 512, 513, tar.length]) expect(verdict(tar, size), `chunks of ${size}`).toBeNull();
  });

  it.each<[string, TarEntry[], RegExp]>([
    ['top//abs', [{ name: 'top//etc/cron.d/x' }], /"top\/\/etc\/cron\.d\/x" is the absolute path "\/etc\/cron\.d\/x"/],
    ['/top//abs', [{ name: '/top//etc/x' }], /is the absolute path "\/etc\/x"/],
    ['a directory top//abs/', [{ name: 'top//etc/x/', type: '5' }], /is the absolute path "\/etc\/x"/],
    ['a symlink at top//abs', [{ name: 'top//etc/x', type: '2', linkname: 'y' }], /is the absolute path/],
    ['a ustar prefix', [{ prefix: 'top', name: '/etc/x' }], /"top\/\/etc\/x" is the absolute path/],
    ['a pax path', [{ name: 'top/ok', pax: { path: 'top//etc/x' } }], /"top\/\/etc\/x" is the absolute path/],
    ['top/../x', [{ name: 'top/../x' }], /has a "\.\." component/],
    ['top/./../x', [{ name: 'top/./../x' }], /has a "\.\." component/],
    ['top/a/..', [{ name: 'top/a/..', type: '5' }], /has a "\.\." component/],
    [
      'a symlink to an absolute path',
      [{ name: 'top/a/link', type: '2', linkname: '/etc/passwd' }],
      /"top\/a\/link" is a symlink to "\/etc\/passwd", which is an absolute path/,
    ],
    [
      'a symlink climbing out',
      [{ name: 'top/a/link', type: '2', linkname: '../../x' }],
      /"top\/a\/link" is a symlink to "\.\.\/\.\.\/x", which leaves the release directory/,
    ],
    [
      'a pax linkpath climbing out',
      [{ name: 'top/a/link', type: '2', linkname: 'ok', pax: { linkpath: '../../x' } }],
      /is a symlink to "\.\.\/\.\.\/x", which leaves/,
    ],
    [
      'a symlink with .. after a name',
      [{ name: 'top/a/link', type: '2', linkname: 'loop/../..' }],
      /is a symlink to "loop\/\.\.\/\.\.", which has a "\.\." after a name/,
    ],
    [
      'a symlink placed through another',
      [
        { name: 'top/x', type: '2', linkname: '.' },
        { name: 'top/x/./x/link', type: '2', linkname: '../../y' },
      ],
      /"top\/x\/\.\/x\/link" is a symlink to "\.\.\/\.\.\/y" inside the symlink "x"/,
    ],
    ['a hard link', [{ name: 'top/h', type: '1', linkname: 'top/a' }], /"top\/h" is a hard link/],
    ['a character device', [{ name: 'top/c', type: '3' }], /is a character device/],
    ['a block device', [{ name: 'top/b', type: '4' }], /is a block device/],
    ['a FIFO', [{ name: 'top/f', type: '6' }], /is a FIFO/],
    ['a GNU long name', [{ name: '././@LongLink', type: 'L', data: 'top//etc/x\0' }], /is a GNU long name/],
    ['a sparse file', [{ name: 'top/s', type: 'S' }], /is a sparse file/],
    ['an unknown type', [{ name: 'top/z', type: 'Z' }], /has the unknown type "Z"/],
  ])('refuses %s, naming the entry', (_, entries, message) => {
    const error = verdict(archive({ name: 'top/', type: '5' }, { name: 'top/ok.py', data: 'OK\n' }, ...entries));
    expect(error).toMatch(new RegExp(`^${WHAT} is refused: the entry `));
    expect(error).toMatch(message);
  });

  it.each<[string, Buffer, RegExp]>([
    ['a header checksum that does not match', archive({ name: 'top/a', badChecksum: true }), /checksum does not match at byte 0/],
    [
      'a pax keyword it does not know (GNU sparse names)',
      archive({ name: 'top/a', pax: { 'GNU.sparse.name': 'top//etc/x' } }),
      /"GNU\.sparse\.name"/,
    ],
    [
      'a path in a global pax header',
      archive({ name: 'g', type: 'g', data: paxRecord('path', 'top//etc/x') }, { name: 'top/a' }),
      /"path" in a global header/,
    ],
    ['a NUL in a pax path', archive({ name: 'top/a', pax: { path: 'top/ok\0//etc/x' } }), /a NUL in the pax path/],
    ['a malformed pax record', archive({ name: 'x', type: 'x', data: '99 path=top//etc/x\n' }, { name: 'top/a' }), /malformed pax header/],
    [
      'two pax headers in a row',
      archive({ name: 'x', type: 'x', data: paxRecord('comment', 'c') }, { name: 'top/a', pax: { comment: 'd' } }),
      /two pax headers in a row/,
    ],
    ['a directory with data', archive({ name: 'top/d', type: '5', data: 'hidden header' }), /has data but is no file/],
    ['a file named like a directory with data', archive({ name: 'top/d/', data: 'hidden header' }), /has data but is no file/],
  ])('refuses %s (no reader may see it differently)', (_, tar, message) => {
    expect(verdict(tar)).toMatch(message);
  });

  it('refuses a size GNU tar would read in base-256', () => {
    const tar = archive({ name: 'top/a', data: 'x' });
    tar.fill(0, 124, 136);
    tar[124] = 0x80;
    tar[135] = 1;
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : tar[i]!;
    tar.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    expect(verdict(tar)).toMatch(/the size of "top\/a" is not an octal number/);
  });

  it('places no symlink check on the top directory, which --strip-components=1 skips', () => {
    expect(verdict(archive({ name: 'top', type: '2', linkname: '/etc' }, { name: 'top/a' }))).toBeNull();
  });

  it('refuses a tarball with more symlinks than it keeps track of, whatever their targets', () => {
    // 32 KiB pax paths: 16 MiB of them in a little over 500 symlinks.
    const links = (n: number) =>
      Array.from({ length: n }, (_, i) =>
        tarEntry({ name: 'top/l', type: '2', linkname: '.', pax: { path: `top/${i}${'p'.repeat(32 * 1024)}` } }),
      );
    expect(verdict(Buffer.concat([...links(400), Buffer.alloc(1024)]))).toBeNull();
    expect(verdict(Buffer.concat([...links(600), Buffer.alloc(1024)]))).toMatch(
      new RegExp(`^${WHAT} is refused: it holds more symlinks than the check keeps track of; nothing was deployed$`),
    );
  });

  it('reads nothing after the end-of-archive block, as GNU tar stops there', () => {
    const tar = Buffer.concat([tarEntry({ name: 'top/a' }), Buffer.alloc(512), tarEntry({ name: 'top//etc/x' })]);
    expect(verdict(tar)).toBeNull();
  });

  it('follows file sizes from the pax header', () => {
    // The header says 0 bytes, pax says 1024: the hostile header sits in what GNU tar reads as data.
    const hidden = tarEntry({ name: 'top//etc/x' });
    const tar = Buffer.concat([tarEntry({ name: 'top/a', pax: { size: '1024' } }), hidden.subarray(0, 512), Buffer.alloc(512)]);
    expect(verdict(tar)).toBeNull();
    // And the other way round: the header's size hides nothing that pax would not.
    const shown = Buffer.concat([tarEntry({ name: 'top/a', size: 512, pax: { size: '0' } }), hidden]);
    expect(verdict(shown)).toMatch(/is the absolute path "\/etc\/x"/);
  });
});

describe('checkTarball', () => {
  async function run(chunks: Buffer[]) {
    const out: Buffer[] = [];
    const stream = checkTarball(Readable.from(chunks, { objectMode: false }), 1024 ** 3, WHAT);
    const error = await new Promise<Error | null>((resolve) => {
      stream.on('data', (c: Buffer) => out.push(c));
      stream.on('end', () => resolve(null));
      stream.on('error', resolve);
    });
    return { error, out: Buffer.concat(out) };
  }
  const chunked = (buf: Buffer, size: number) =>
    Array.from({ length: Math.ceil(buf.length / size) }, (_, i) => buf.subarray(i * size, (i + 1) * size));

  it('passes a good tarball through unchanged', async () => {
    const gz = tarball([
      { name: 'top/', type: '5' },
      { name: 'top/a.py', data: randomBytes(100_000) },
    ]);
    const { error, out } = await run(chunked(gz, 4096));
    expect(error).toBeNull();
    expect(out.equals(gz)).toBe(true);
  });

  it('forwards nothing from which the refused entry could be inflated', async () => {
    const gz = tarball([
      { name: 'top/', type: '5' },
      ...Array.from({ length: 4 }, (_, i) => ({ name: `top/blob${i}`, data: randomBytes(50_000) })),
      { name: 'top//etc/cron.d/evil', data: 'x' },
      { name: 'top/after', data: randomBytes(50_000) },
    ]);
    const { error, out } = await run(chunked(gz, 1000));
    expect(error?.message).toMatch(/the entry "top\/\/etc\/cron\.d\/evil" is the absolute path/);
    expect(out.length).toBeGreaterThan(150_000); // the good entries went on while they streamed
    // All a receiver can inflate from what was forwarded (10 bytes of gzip header skipped).
    const inflated = inflateRawSync(out.subarray(10), { finishFlush: constants.Z_SYNC_FLUSH });
    expect(inflated.includes('cron.d/evil')).toBe(false);
    expect(inflated.includes('top/blob3')).toBe(true);
  });

  it('reads every gzip member, as gzip -d does: a hostile entry in the second is refused', async () => {
    const first = gzipSync(Buffer.concat([tarEntry({ name: 'top/', type: '5' }), tarEntry({ name: 'top/a', data: 'A' })]));
    const second = gzipSync(Buffer.concat([tarEntry({ name: 'top//etc/x', data: 'X' }), Buffer.alloc(1024)]));
    expect(gunzipSync(Buffer.concat([first, second])).includes('top//etc/x')).toBe(true);
    const { error } = await run([first, second]);
    expect(error?.message).toMatch(/the entry "top\/\/etc\/x" is the absolute path/);
  });
});
