// svc's addons as setup_odoo ships them: the tarball unpacks to the repository's tree, and the
// checksum svc computes is the one the host computes over what it unpacked (find, sort, sha256sum),
// so an unchanged tree is never sent again and a changed one always is.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addonsBundle, SVC_ADDONS_DIR, treeChecksum } from '../../src/odoo/odoo-svc-addons.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** What installedAddons runs on the host (host/svc-addons.sh sum), run here. */
const hostSum = (dir: string) => execFileSync('/bin/sh', ['-c', treeChecksum(dir)], { encoding: 'utf8' }).trim();

describe("svc's addons bundle", () => {
  it('unpacks to the tree whose checksum the host computes the same way', async () => {
    const bundle = addonsBundle();
    expect(bundle.files).toBeGreaterThan(1);
    const dir = await mkdtemp(path.join(tmpdir(), 'svc-addons-'));
    dirs.push(dir);
    await writeFile(`${dir}.tgz`, bundle.tarball);
    dirs.push(`${dir}.tgz`);
    execFileSync('tar', ['-xzf', `${dir}.tgz`, '-C', dir, '--no-same-owner']);
    expect(hostSum(dir)).toBe(bundle.sha256);
    expect(hostSum(SVC_ADDONS_DIR)).toBe(bundle.sha256);
    expect(execFileSync('ls', [dir], { encoding: 'utf8' })).toContain('svc_instance');
  });

  it('is the same for the same tree and differs when a file does', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'svc-addons-src-'));
    dirs.push(dir);
    execFileSync('cp', ['-r', `${SVC_ADDONS_DIR}/.`, dir]);
    const a = addonsBundle(dir);
    expect(addonsBundle(dir).tarball.equals(a.tarball)).toBe(true);
    await writeFile(path.join(dir, 'svc_instance', '__init__.py'), '# changed\n', { flag: 'a' });
    expect(addonsBundle(dir).sha256).not.toBe(a.sha256);
  });
});
