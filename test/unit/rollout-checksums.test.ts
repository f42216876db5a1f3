// What a rollout decides without a host: the module checksums (the script the host runs, run here
// on a scratch tree), which installed modules changed for a tenant, the order of the tenants, and
// Odoo's words about a failed update.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checksumsScript, checkModuleNames, readChecksums, updateScript } from '../../src/rollouts/rollout-scripts.js';
import { changedModules, checksumsOf, updateError } from '../../src/rollouts/rollout-tenant.js';
import { tenantOrder } from '../../src/rollouts/rollout-runner.js';
import { odooLayout } from '../../src/odoo/odoo-layout.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'svc-rollout-sums-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function write(rel: string, content: string) {
  const file = path.join(scratch, rel);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
}

const sums = (dirs: string[]) => readChecksums(execFileSync('sh', ['-c', checksumsScript(dirs)], { encoding: 'utf8' }));

describe('module checksums', () => {
  write('a/demo/__manifest__.py', '{"name": "demo"}\n');
  write('a/demo/__init__.py', 'from . import models\n');
  write('a/demo/models/x.py', 'X = 1\n');
  write('a/demo/static/src/app.js', 'console.log(1)\n');
  write('a/demo/i18n/fr.po', 'msgid ""\n');
  write('a/demo/tests/test_x.py', 'pass\n');
  write('a/not_a_module/readme.txt', 'no manifest\n');
  write('b/demo/__manifest__.py', '{"name": "the other demo"}\n');
  write('b/other/__manifest__.py', '{"name": "other"}\n');
  const dirs = [path.join(scratch, 'a'), path.join(scratch, 'b'), path.join(scratch, 'missing')];

  it('one per module, the first directory holding it winning; folders without a manifest are no modules', () => {
    const { sums: s, dirs: where } = sums(dirs);
    expect(Object.keys(s).sort()).toEqual(['demo', 'other']);
    expect(where).toEqual({ demo: dirs[0], other: dirs[1] });
    expect(s.demo).toMatch(/^[0-9a-f]{64}$/);
  });

  it('static/, i18n/, tests/ and compiled files do not count; code, data and a symlink target do', () => {
    const before = sums(dirs).sums.demo;
    write('a/demo/static/src/app.js', 'console.log(2)\n');
    write('a/demo/i18n/de.po', 'msgid "x"\n');
    write('a/demo/tests/test_y.py', 'pass\n');
    write('a/demo/models/__pycache__/x.cpython-311.pyc', 'bytes');
    write('a/demo/i18n_extra/demo.pot', 'x');
    expect(sums(dirs).sums.demo).toBe(before);
    write('a/demo/models/x.py', 'X = 2\n');
    const changed = sums(dirs).sums.demo;
    expect(changed).not.toBe(before);
    symlinkSync('models/x.py', path.join(scratch, 'a/demo/link.py'));
    expect(sums(dirs).sums.demo).not.toBe(changed);
    // A renamed file changes it too (the path counts, not only the content).
    write('a/demo/data/one.xml', '<odoo/>');
    const withOne = sums(dirs).sums.demo;
    rmSync(path.join(scratch, 'a/demo/data/one.xml'));
    write('a/demo/data/two.xml', '<odoo/>');
    expect(sums(dirs).sums.demo).not.toBe(withOne);
  });
});

describe('changed modules', () => {
  const host = {
    sums: { base: 's1', web: 's2', demo: 'new', other: 'o1' },
    dirs: { base: '/odoo', web: '/odoo', demo: '/deploy', other: '/deploy' },
    deployPath: '/deploy',
  };

  it('those whose checksum differs from the recorded one', () => {
    expect(changedModules(['base', 'demo', 'web'], host, { base: 's1', web: 's2', demo: 'old' })).toEqual(['demo']);
    expect(changedModules(['base', 'demo', 'web'], host, { base: 's1', web: 's2', demo: 'new' })).toEqual([]);
  });

  it('without a recorded checksum: those in the deploy path being rolled out; a module gone from the addons path is left alone', () => {
    expect(changedModules(['base', 'demo', 'web', 'gone'], host, null)).toEqual(['demo']);
    expect(changedModules(['base', 'other'], host, { base: 's1' })).toEqual(['other']);
    expect(changedModules(['base', 'demo'], { ...host, deployPath: null }, null)).toEqual([]);
    expect(changedModules(['base'], host, null)).toEqual([]);
  });

  it('records the checksums of the installed modules only', () => {
    expect(checksumsOf(['base', 'demo', 'gone'], host.sums)).toEqual({ base: 's1', demo: 'new' });
  });
});

describe('order and errors', () => {
  it('trials first (the default), paid first, or the oldest first; then by age', () => {
    expect(tenantOrder('trials_first')).toEqual([{ is_trial: 'desc' }, { created_at: 'asc' }, { id: 'asc' }]);
    expect(tenantOrder('paid_first')).toEqual([{ is_trial: 'asc' }, { created_at: 'asc' }, { id: 'asc' }]);
    expect(tenantOrder('oldest_first')).toEqual([{ created_at: 'asc' }, { id: 'asc' }]);
  });

  it("names the module Odoo was loading and keeps Odoo's complaints", () => {
    const out = [
      '2026-11-28 12:00:00,000 1 ERROR db odoo.modules.registry: Failed to load registry',
      'ValueError: this tenant holds a poison record',
      'SVC-LAST-MODULE 2026-11-28 12:00:00,000 1 INFO db odoo.modules.loading: Loading module svc_rollout_demo (12/12)',
      '--- end of output ---',
    ].join('\n');
    const error = updateError(out, '255');
    expect(error).toMatch(/^while updating module svc_rollout_demo: odoo-bin exited with 255\n/);
    expect(error).toContain('poison record');
    expect(error).not.toContain('SVC-LAST-MODULE');
  });

  it('module names are checked before they reach the update command', () => {
    expect(() => checkModuleNames(['demo', 'x;rm -rf /'])).toThrow(/is not a module name/);
    expect(updateScript(odooLayout('/opt/odoo', 8069), '/opt/odoo/versions/18.0', 'acme', ['demo', 'web'])).toContain("'-u' 'demo,web'");
  });
});
