// npm run lint, after Biome: the OpenAPI document the service serves, linted as API tools see it,
// by Spectral (spectral:oas) and Redocly (recommended). The app is built with buildApp() and asked
// for GET /api/v1/openapi.json, without listening and without PostgreSQL or Redis (nothing
// connects: the database pool and Redis open on first use, and no request uses them). Every error
// or warning fails the run, except the findings ACCEPTED below, each explained in
// docs/decisions.md ("The API as tools see it").
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { type AppContext, createContext } from '../src/context.js';
import { loadConfig } from '../src/core/config.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const BIN = path.join(ROOT, 'node_modules', '.bin');

interface Finding {
  linter: 'spectral' | 'redocly';
  rule: string;
  severity: 'error' | 'warning';
  /** JSON pointer into the document, e.g. #/paths/~1healthz/get/responses. */
  at: string;
  message: string;
}

/** Findings the docs justify (docs/decisions.md); anything else fails the lint. */
const ACCEPTED: { rule: string; at?: string; why: string }[] = [
  {
    rule: 'info-contact',
    why: 'the document describes one installation; whom to contact is its operators, whom the service does not know',
  },
  { rule: 'info-license', why: 'the API is not published under a licence' },
  { rule: 'no-server-example.com', why: "the server is the installation's own BASE_URL, http://localhost:3000 by default" },
  {
    rule: 'operation-4xx-response',
    at: '#/paths/~1healthz/get/responses',
    why: 'the health probe answers 200 or 503, never a client error',
  },
  { rule: 'operation-4xx-response', at: '#/paths/~1saas~1trial/get/responses', why: 'the form page answers every request' },
];

/** The app's context, without connections: building the app and serving the document opens none. */
function offlineContext(dir: string): Promise<AppContext> {
  const config = loadConfig({ SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'), LOG_LEVEL: 'silent', SMTP_URL: '' });
  return createContext(config, pino({ level: 'silent' }), { lazy: true });
}

async function servedDocument(dir: string): Promise<string> {
  const ctx = await offlineContext(dir);
  const app = await buildApp(ctx);
  try {
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`GET /api/v1/openapi.json answered ${res.statusCode}: ${res.body}`);
    return res.body;
  } finally {
    await app.close();
    await ctx.close();
  }
}

/** Runs a linter that reports in JSON; its exit status only says whether it found something. */
async function run(bin: string, args: string[]): Promise<string> {
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  try {
    return (await promisify(execFile)(path.join(BIN, bin), args, { cwd: ROOT, env, maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    if (stdout?.trim()) return stdout;
    throw new Error(`${bin} failed: ${stderr ?? err}`);
  }
}

const pointer = (segments: (string | number)[]) =>
  `#/${segments.map((s) => String(s).replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`;

async function spectral(file: string): Promise<Finding[]> {
  const out = await run('spectral', ['lint', file, '--ruleset', 'scripts/openapi-lint/spectral.yaml', '--format', 'json', '--quiet']);
  const results = JSON.parse(out.slice(out.indexOf('['))) as { code: string; message: string; path: string[]; severity: number }[];
  return results
    .filter((r) => r.severity <= 1)
    .map((r) => ({
      linter: 'spectral',
      rule: r.code,
      severity: r.severity === 0 ? 'error' : 'warning',
      at: pointer(r.path),
      message: r.message,
    }));
}

async function redocly(file: string): Promise<Finding[]> {
  const out = await run('redocly', ['lint', file, '--config', 'scripts/openapi-lint/redocly.yaml', '--format', 'json']);
  const report = JSON.parse(out.slice(out.indexOf('{'))) as {
    problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
  };
  return report.problems
    .filter((p) => p.severity === 'error' || p.severity === 'warn')
    .map((p) => ({
      linter: 'redocly',
      rule: p.ruleId,
      severity: p.severity === 'error' ? 'error' : 'warning',
      at: p.location[0]?.pointer ?? '#',
      message: p.message,
    }));
}

async function main() {
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-openapi-'));
  try {
    const file = path.join(dir, 'openapi.json');
    await writeFile(file, await servedDocument(dir));
    const findings = (await Promise.all([spectral(file), redocly(file)])).flat();
    const accepted = (f: Finding) => ACCEPTED.some((a) => a.rule === f.rule && (a.at === undefined || a.at === f.at));
    const problems = findings.filter((f) => !accepted(f));
    for (const f of problems) console.error(`${f.linter} ${f.severity} ${f.rule} at ${f.at}: ${f.message}`);
    const size = (await readFile(file)).length;
    const summary = `OpenAPI document (${Math.round(size / 1024)} KiB): Spectral spectral:oas and Redocly recommended`;
    if (problems.length > 0) {
      console.error(`${summary}: ${problems.length} problem(s)`);
      process.exitCode = 1;
    } else {
      console.log(`${summary}: no problem (${findings.length} accepted finding(s), see docs/decisions.md)`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
