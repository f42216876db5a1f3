// An Odoo source tarball as the real-Odoo suite and the Odoo benches use it: its checksum, its series
// (from odoo/release.py inside it) and the Debian packages that series needs. No test runner here:
// the benches import it too.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_OS_PACKAGES } from '../../src/odoo/odoo-names.js';

export interface OdooSource {
  file: string;
  sha256: string;
  /** 18, 19... from odoo/release.py */
  series: number;
  /** e.g. "18.0" */
  name: string;
}

/** What a version of this series needs (19.0: without decorator and typing-extensions, with magic). */
export function packagesOf(series: number): string[] {
  if (series < 19) return [...DEFAULT_OS_PACKAGES];
  return [...DEFAULT_OS_PACKAGES.filter((p) => p !== 'python3-decorator' && p !== 'python3-typing-extensions'), 'python3-magic'];
}

/** The server-wide modules of a series (19.0 serves JSON-RPC from its own `rpc` module). */
export const serverWideModulesOf = (series: number) => (series >= 19 ? ['base', 'rpc', 'web'] : ['base', 'web']);

/** The tarball described; an Error when it holds no Odoo server tree. */
export function describeOdooSource(file: string): OdooSource {
  const abs = path.resolve(file);
  const top = execFileSync('tar', ['-tzf', abs], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
    .split('\n')
    .find((e) => /^(\.\/)?([^/]+\/)?odoo\/release\.py$/.test(e));
  if (!top) throw new Error(`${abs} holds no odoo/release.py: not an Odoo source tree`);
  const release = execFileSync('tar', ['-xzOf', abs, top], { encoding: 'utf8' });
  const series = Number(/version_info\s*=\s*\(\s*(?:'saas~)?(\d+)/.exec(release)?.[1]);
  if (!series) throw new Error(`${abs}: no version_info in odoo/release.py`);
  return { file: abs, sha256: createHash('sha256').update(readFileSync(abs)).digest('hex'), series, name: `${series}.0` };
}

/** The tarballs ODOO_SOURCE names (comma-separated). */
export const odooSourceFiles = (value: string | undefined) => (value ?? '').split(',').filter(Boolean);

/** A bench's Odoo: the first tarball of ODOO_SOURCE with its packages; without one it says how and exits. */
export function benchOdooSource(script: string, env: string | undefined) {
  const [file] = odooSourceFiles(env);
  if (!file) {
    console.error('ODOO_SOURCE is not set: name an Odoo source tarball (see README, "Tests with a real Odoo"), e.g.');
    console.error(`  ODOO_SOURCE=/path/to/odoo-18.0-core.tar.gz npm run ${script}`);
    process.exit(2);
  }
  const source = describeOdooSource(file);
  return { ...source, packages: packagesOf(source.series) };
}
