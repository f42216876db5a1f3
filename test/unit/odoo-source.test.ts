// host/odoo-source.sh run alone with /bin/sh, as setup_odoo builds its commands, on a stand-in Odoo
// tarball (an odoo-bin that answers --version): a refused tarball leaves the tree as it was (exit
// code 3 with the reason), an accepted one is put in place with its markers and described.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { odooLayout } from '../../src/odoo/odoo-layout.js';
import { describeSource, installedSource, unpackSource } from '../../src/odoo/odoo-scripts.js';

const exec = promisify(execFile);

async function run(command: string) {
  try {
    const { stdout, stderr } = await exec('/bin/sh', ['-c', command], { encoding: 'utf8' });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('host/odoo-source.sh', () => {
  let base: string;
  let tarball: string;
  let sha256: string;
  let l: ReturnType<typeof odooLayout>;

  beforeAll(() => {
    base = mkdtempSync(path.join(tmpdir(), 'svc-odoo-source-'));
    l = odooLayout(base, 8069);
    mkdirSync(l.versionsDir, { recursive: true });
    const tree = path.join(base, 'src', 'odoo-18.0');
    mkdirSync(path.join(tree, 'odoo', 'addons', 'base'), { recursive: true });
    mkdirSync(path.join(tree, 'addons'), { recursive: true });
    writeFileSync(path.join(tree, 'odoo-bin'), 'import sys\nif "--version" in sys.argv: print("Odoo Server 18.0")\n');
    tarball = path.join(base, 'odoo.tar.gz');
    execFileSync('tar', ['-czf', tarball, '-C', path.join(base, 'src'), 'odoo-18.0']);
    sha256 = createHash('sha256').update(readFileSync(tarball)).digest('hex');
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('refuses a tarball whose checksum differs (exit code 3, the reason on stderr) and puts nothing in place', async () => {
    const res = await run(unpackSource(l, '18.0', tarball, 'a'.repeat(64), false));
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(`Checksum mismatch: the source's SHA-256 is ${sha256}`);
    expect((await run(installedSource(l, '18.0'))).stdout.trim()).toBe('none');
    expect((await run(describeSource(l.sourceOf('18.0')))).code).toBe(3);
  });

  it('unpacks a checked tarball from its one top directory, marks it and describes it', async () => {
    const res = await run(unpackSource(l, '18.0', tarball, sha256, false));
    expect(res).toMatchObject({ code: 0, stdout: 'Odoo Server 18.0\n' });
    expect((await run(installedSource(l, '18.0'))).stdout.trim()).toBe(sha256);
    const described = await run(describeSource(l.sourceOf('18.0')));
    expect(described.stdout.trim().split('\n')).toEqual([
      'Odoo Server 18.0',
      `addons=${l.sourceOf('18.0')}/odoo/addons`,
      `addons=${l.sourceOf('18.0')}/addons`,
    ]);
  });

  it('refuses a tarball without odoo-bin', async () => {
    const empty = path.join(base, 'empty.tar.gz');
    writeFileSync(path.join(base, 'README'), 'not Odoo\n');
    execFileSync('tar', ['-czf', empty, '-C', base, 'README']);
    const sum = createHash('sha256').update(readFileSync(empty)).digest('hex');
    const res = await run(unpackSource(l, '18.1', empty, sum, true));
    expect(res.code).toBe(3);
    expect(res.stderr).toContain('The tarball holds no odoo-bin');
    // An https download is removed when refused.
    expect((await run(`test -e ${empty}`)).code).toBe(1);
  });
});
