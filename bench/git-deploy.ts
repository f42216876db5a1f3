// npm run bench:git-deploy [-- --modules 40] [--deploys 5]
// Deploys an Odoo-like addons repository (N modules of 12 .py and 4 .xml files each) with the
// service's own push_commit job: the service downloads the commit's tarball from the local git host
// (test/helpers/git-host.ts: the API's 302 to its codeload server, a real `git archive`) and streams
// it over SSH to a local OpenSSH server, which unpacks, validates and switches.
// Prints the duration of each deploy (BullMQ processedOn → finishedOn) and, on the same tree, the
// validation step two ways: one python3 process for the whole tree (what the deploy does) against
// `python3 -m py_compile <file>` and an XML parse per file (an interpreter start per file).
// Needs /usr/sbin/sshd, git, python3, PostgreSQL and Redis like the tests; run as root.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { sleep } from '../src/core/sleep.js';
import { startWorkers } from '../src/worker.js';
import { createGitRepositoryService } from '../src/git/git-repository-service.js';
import { startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { startFakeGitHost, type TestRepo } from '../test/helpers/git-host.js';
import { createAuthService } from '../src/auth/auth-service.js';
import { findJob } from '../test/helpers/api.js';
import { createBenchContext } from './bench-context.js';

const run = promisify(execFile);
/** The deploy's check of a tree (src/git/host/validate_tree.py), run as the file it is. */
const VALIDATE_TREE = fileURLToPath(new URL('../src/git/host/validate_tree.py', import.meta.url));
// The interpreter a server's login shell finds (not a version manager's shim, which costs a shell per start).
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const TOKEN = 'ghp_bench-token-0123456789';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

function addonsTree(modules: number, version: number): Record<string, string> {
  const files: Record<string, string> = {};
  for (let m = 0; m < modules; m++) {
    const dir = `module_${m}`;
    files[`${dir}/__init__.py`] = 'from . import models\n';
    files[`${dir}/__manifest__.py`] = `{"name": "Module ${m}", "version": "17.0.${version}", "depends": ["base"], "data": []}\n`;
    files[`${dir}/models/__init__.py`] = Array.from({ length: 10 }, (_, i) => `from . import model_${i}\n`).join('');
    for (let i = 0; i < 9; i++) {
      files[`${dir}/models/model_${i}.py`] = [
        'from odoo import api, fields, models',
        '',
        `class Model${i}(models.Model):`,
        `    _name = "module_${m}.model_${i}"`,
        '    name = fields.Char(required=True)',
        `    value = fields.Integer(default=${version})`,
        '',
        '    @api.depends("value")',
        '    def _compute_double(self):',
        '        for record in self:',
        '            record.double = record.value * 2',
        '',
      ].join('\n');
    }
    for (let x = 0; x < 4; x++) {
      files[`${dir}/views/view_${x}.xml`] =
        `<odoo>\n  <record id="view_${m}_${x}" model="ir.ui.view">\n    <field name="name">v${version}</field>\n    <field name="arch" type="xml"><form><field name="name"/></form></field>\n  </record>\n</odoo>\n`;
    }
  }
  return files;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

async function timeValidation(dir: string) {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) files.push(path.join(entry.parentPath, entry.name));
  }
  const py = files.filter((f) => f.endsWith('.py'));
  const xml = files.filter((f) => f.endsWith('.xml'));
  let start = performance.now();
  await run(PYTHON, [VALIDATE_TREE, dir]);
  const oneProcess = performance.now() - start;
  start = performance.now();
  for (const f of py)
    await run(PYTHON, ['-m', 'py_compile', f], {
      env: { ...process.env, PYTHONPYCACHEPREFIX: path.join(os.tmpdir(), 'svc-bench-pycache') },
    });
  for (const f of xml) await run(PYTHON, ['-c', 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])', f]);
  const perFile = performance.now() - start;
  return { py: py.length, xml: xml.length, oneProcess, perFile };
}

async function main() {
  const modules = arg('modules', 40);
  const deploys = arg('deploys', 5);
  const sshd = await startSshd();
  const host = await startFakeGitHost(TOKEN);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-git-'));
  await run('chmod', ['777', scratch]);
  const bench = await createBenchContext('git', { GIT_API_URL: host.url, ODOO_BASE_PATH: path.join(scratch, 'opt', 'odoo') });
  const { ctx, config } = bench;
  const workers = await startWorkers(ctx);
  try {
    const user = await createAuthService(ctx).createUser({ email: 'bench@svc.test', group: 'administrator' });
    const server = await ctx.db.rootServer.create({
      data: {
        ip: sshd.host,
        port: sshd.port,
        username: TEST_USERS.key.name,
        key: await ctx.secretBox.encrypt(sshd.keys.ed25519Openssh),
        state: 'confirmed',
        host_key: sshd.hostKey,
      },
    });
    const account = await ctx.db.gitAccount.create({ data: { access_token: await ctx.secretBox.encrypt(TOKEN), user_id: user.id } });
    const repo = await ctx.db.gitRepository.create({
      data: { name: 'acme/addons', branch_name: 'main', git_account_id: account.id, root_server_id: server.id },
    });
    const remote: TestRepo = await host.repo('acme/addons');
    const service = createGitRepositoryService(ctx);

    const durations: number[] = [];
    for (let d = 1; d <= deploys; d++) {
      remote.commit(addonsTree(modules, d), `version ${d}`);
      const jobId = await service.pushCommit(repo.id, null);
      let done = (await findJob(ctx, jobId))!;
      while (!done.finishedOn) {
        await sleep(50);
        done = (await findJob(ctx, jobId))!;
      }
      if (done.failedReason) throw new Error(`deploy ${d} failed: ${done.failedReason}`);
      durations.push(done.finishedOn! - done.processedOn!);
      console.log(`deploy ${d}: ${durations.at(-1)} ms (${JSON.stringify(done.returnvalue.checked)})`);
    }
    const live = path.join(config.ODOO_BASE_PATH, 'custom-addons', 'addons');
    const v = await timeValidation(await realpath(live));
    console.log(`\n# bench:git-deploy — ${modules} modules (${v.py} .py, ${v.xml} .xml), ${deploys} deploys, ${os.cpus().length} CPUs`);
    console.log(
      `deploy (download + stream + unpack + validate + switch, over SSH): first ${durations[0]} ms, median ${median(durations)} ms`,
    );
    console.log(`validation, one python3 process:        ${Math.round(v.oneProcess)} ms`);
    console.log(`validation, one python3 start per file: ${Math.round(v.perFile)} ms`);
    console.log(`ratio per-file / one process: ${(v.perFile / v.oneProcess).toFixed(1)}×`);
  } finally {
    await workers.close();
    await bench.close();
    await host.close();
    await sshd.stop();
    await rm(scratch, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
