// host/odoo-once.sh run alone with /bin/sh, as asOdoo builds its command, against a stand-in
// odoo-bin (a Python script that logs like Odoo): what it prints, its exit code, its refusals, its
// lock. Run as root, as on the hosts (setpriv to the odoo user).
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { odooLayout } from '../../src/odoo/odoo-layout.js';
import { asOdoo, odooBin, odooRunLog } from '../../src/odoo/odoo-once.js';

const exec = promisify(execFile);

/** Logs like Odoo on stderr, answers its standard input on stdout, exits with ODOO_RC (default 0). */
const FAKE_ODOO_BIN = `
import os, sys
sys.stderr.write("2026-11-29 12:00:00,000 1 INFO db odoo.modules.loading: Loading module web (2/3)\\n")
if "--fail" in sys.argv:
    sys.stderr.write("2026-11-29 12:00:01,000 1 ERROR db odoo.modules.loading: demo failed\\nTraceback (most recent call last):\\nValueError: boom\\n")
print("args=" + " ".join(sys.argv[1:]))
print("user=" + str(os.getuid()) + " home=" + os.environ["HOME"])
if "shell" in sys.argv:
    print("answer=" + sys.stdin.read().strip())
sys.exit(1 if "--fail" in sys.argv else 0)
`;

async function run(command: string, stdin?: string) {
  const child = exec('/bin/sh', ['-c', command], { encoding: 'utf8' });
  if (stdin !== undefined) child.child.stdin!.end(stdin);
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('host/odoo-once.sh', () => {
  let base: string;
  let source: string;
  let l: ReturnType<typeof odooLayout>;

  beforeAll(() => {
    base = mkdtempSync(path.join(tmpdir(), 'svc-odoo-once-'));
    chmodSync(base, 0o755);
    l = odooLayout(base, 8069);
    source = l.sourceOf('18.0');
    for (const dir of [source, `${base}/logs`, l.dataDir]) mkdirSync(dir, { recursive: true, mode: 0o755 });
    writeFileSync(`${source}/odoo-bin`, FAKE_ODOO_BIN, { mode: 0o755 });
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('runs odoo-bin as odoo in the tree, keeps its output whole in the log and prints its end', async () => {
    const res = await run(asOdoo(l, { source, database: 'acme', kind: 'build' }, odooBin(l, 'acme', ['-i', 'base,web'])));
    expect(res.code).toBe(0);
    expect(res.stdout).toContain(`args=-c ${l.config} -d acme -i base,web --no-http --workers=0 --max-cron-threads=0 --stop-after-init`);
    expect(res.stdout).toMatch(new RegExp(`user=[1-9][0-9]* home=${l.dataDir}`));
    expect(res.stdout).toContain('SVC-LAST-MODULE 2026-11-29 12:00:00,000 1 INFO db odoo.modules.loading: Loading module web (2/3)');
    expect(res.stdout).toContain('--- end of output ---');
    expect(readFileSync(odooRunLog(l, { database: 'acme', kind: 'build' }), 'utf8')).toContain('args=');
  });

  it("answers Odoo's exit code with its complaints first", async () => {
    const res = await run(asOdoo(l, { source, database: 'acme', kind: 'update' }, odooBin(l, 'acme', ['-u', 'demo', '--fail'])));
    expect(res.code).toBe(1);
    const [complaints, end] = res.stdout.split('--- end of output ---');
    expect(complaints).toContain('ERROR db odoo.modules.loading: demo failed');
    expect(complaints).toContain('ValueError: boom');
    expect(end).toContain('args=');
  });

  it('gives odoo-bin shell its program on stdin and prints only the answer when it succeeds', async () => {
    const command = asOdoo(l, { source, database: 'acme', kind: 'assets', output: 'answer' }, odooBin(l, 'acme', [], 'shell'));
    const res = await run(command, 'print(1)');
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('answer=print(1)');
    expect(res.stdout).not.toContain('--- end of output ---');
    expect(res.stderr).toBe('');
    const failed = await run(
      asOdoo(l, { source, database: 'acme', kind: 'assets', output: 'answer' }, ['odoo-bin', 'shell', '--fail']),
      '',
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('ValueError: boom');
  });

  it('refuses a tree that is not there with exit code 3 and the reason on stderr', async () => {
    const res = await run(asOdoo(l, { source: `${base}/versions/none`, database: 'acme', kind: 'build' }, odooBin(l, 'acme', [])));
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(`No Odoo source tree at ${base}/versions/none`);
  });

  it('holds the lock while Odoo runs: another run with it finds it held', async () => {
    const lock = `${base}/run/rollout-acme.lock`;
    // Odoo's stand-in says it started, then waits until the test lets it end.
    writeFileSync(
      `${source}/waiting-bin`,
      `import os, sys, time\nopen(sys.argv[1], "w").close()\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.05)\nprint("done")\n`,
    );
    const started = `${l.dataDir}/started`;
    const release = `${base}/release`;
    chmodSync(l.dataDir, 0o777);
    const first = run(asOdoo(l, { source, database: 'acme', kind: 'update', lock }, ['waiting-bin', started, release]));
    while (!existsSync(started)) await new Promise((r) => setTimeout(r, 20));
    expect((await run(`flock -n ${lock} true`)).code).not.toBe(0);
    writeFileSync(release, '');
    expect((await first).stdout).toContain('done');
    expect((await run(`flock -n ${lock} true`)).code).toBe(0);
  });
});
