// svc's own Odoo addons (the repository's odoo-addons/ folder), as setup_odoo ships them to a host
// (<base>/svc-addons, on addons_path): a gzip'd tarball, the tree's checksum, and the host's side.
// The checksum is the SHA-256 of what `sha256sum` prints for the tree's files, sorted by path ("<sha256>  ./svc_instance/__init__.py" lines), so the host
// computes the same one over what it holds with find, sort and sha256sum: a tree changed on the
// host is found and sent again, an unchanged one is not sent at all.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { hostProgram, shCommand } from '../core/host-program.js';
import type { OdooLayout } from './odoo-layout.js';

/** The repository's folder of svc's addons. */
export const SVC_ADDONS_DIR = path.resolve(fileURLToPath(new URL('../../odoo-addons', import.meta.url)));

/** Files that are not part of the tree: Python's caches, and the marker files the host keeps beside it. */
const skipped = (name: string) => name === '__pycache__' || name.endsWith('.pyc') || name.startsWith('.svc-');

export interface AddonsBundle {
  sha256: string;
  tarball: Buffer;
  files: number;
}

function walk(root: string, rel = '.'): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(root, rel))) {
    if (skipped(name)) continue;
    const child = `${rel}/${name}`;
    const st = statSync(path.join(root, child));
    if (st.isDirectory()) out.push(...walk(root, child));
    else if (st.isFile()) out.push(child);
  }
  return out;
}

/** One ustar header block (512 bytes) for a regular file or a directory. */
function ustarHeader(name: string, size: number, type: '0' | '5'): Buffer {
  const h = Buffer.alloc(512);
  if (Buffer.byteLength(name) > 100) throw new Error(`${name}: a path in odoo-addons longer than 100 bytes`);
  h.write(name, 0, 100, 'utf8');
  h.write(type === '5' ? '0000755\0' : '0000644\0', 100, 8, 'ascii');
  h.write('0000000\0', 108, 8, 'ascii');
  h.write('0000000\0', 116, 8, 'ascii');
  h.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 12, 'ascii');
  // A fixed time: the same tree makes the same tarball.
  h.write('00000000000\0', 136, 12, 'ascii');
  h.write('        ', 148, 8, 'ascii');
  h.write(type, 156, 1, 'ascii');
  h.write('ustar\0', 257, 6, 'ascii');
  h.write('00', 263, 2, 'ascii');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return h;
}

/** The bundle of a folder of addons (default: the repository's). */
export function addonsBundle(root = SVC_ADDONS_DIR): AddonsBundle {
  const files = walk(root).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const listing: string[] = [];
  const blocks: Buffer[] = [];
  const dirs = new Set<string>();
  for (const file of files) {
    const content = readFileSync(path.join(root, file));
    listing.push(`${createHash('sha256').update(content).digest('hex')}  ${file}\n`);
    const parts = file.split('/').slice(1, -1);
    for (let i = 1; i <= parts.length; i++) {
      const dir = `${parts.slice(0, i).join('/')}/`;
      if (!dirs.has(dir)) {
        dirs.add(dir);
        blocks.push(ustarHeader(dir, 0, '5'));
      }
    }
    blocks.push(ustarHeader(file.slice(2), content.length, '0'), content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return {
    sha256: createHash('sha256').update(listing.join('')).digest('hex'),
    tarball: gzipSync(Buffer.concat(blocks)),
    files: files.length,
  };
}

const SVC_ADDONS = hostProgram(new URL('./host/svc-addons.sh', import.meta.url));

/** Prints the checksum of a directory's tree, computed as addonsBundle does, or "none" when there is none. */
export const treeChecksum = (dir: string) => shCommand(SVC_ADDONS, 'svc-addons', 'sum', dir);

/** Prints the checksum of the host's svc-addons directory, or "none" when there is none. */
export const installedAddons = (l: OdooLayout) => treeChecksum(l.svcAddons);

/**
 * Unpacks the tarball on stdin beside the host's svc-addons directory, checks it against `sha256`,
 * and only then puts it in place: root's, readable by every user (Odoo's reads it), writable by
 * root only. Exit code 3: the tree that arrived is not the one sent.
 */
export const installAddons = (l: OdooLayout, sha256: string) => shCommand(SVC_ADDONS, 'svc-addons', 'install', l.base, l.svcAddons, sha256);
