// npx tsx scripts/dashboard-screenshot.ts [--minutes 8] [--servers 40] [--out docs/grafana/svc-dashboard.png]
// A picture of docs/grafana/svc.json fed by a real Prometheus scrape, for the docs. Grafana is
// neither in Debian nor on npm, so its panels are drawn here: the service runs as a real process
// (API and workers) monitoring N servers on a local OpenSSH server (the test harness), with alert
// rules, a maintenance window, subscriptions and webhook calls; Debian's Prometheus scrapes its
// /metrics every 5 s with a bearer token; after `--minutes`, each panel's queries are run on
// Prometheus's query API ($__rate_interval as 20 s: four scrapes) and drawn with uPlot in a page
// laid out by the panels' gridPos, which headless Chromium (Debian's) photographs. Everything
// listens on loopback; the database, Redis keys and files are removed at the end.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { createAuthService } from '../src/auth/auth-service.js';
import { createBenchContext } from '../bench/bench-context.js';
import { createServers } from '../bench/fleet.js';
import { freePort, startSshd } from '../test/helpers/sshd.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? (args[i + 1] ?? fallback) : fallback;
};
const MINUTES = Number(arg('--minutes', '8'));
const SERVERS = Number(arg('--servers', '40'));
const OUT = path.resolve(ROOT, arg('--out', 'docs/grafana/svc-dashboard.png'));
const RATE_INTERVAL = '20s';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Target {
  expr: string;
  legendFormat?: string;
  instant?: boolean;
}
interface Panel {
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  fieldConfig?: { defaults?: { unit?: string; min?: number; max?: number } };
}

async function waitFor(url: string, init?: RequestInit) {
  for (let i = 0; i < 120; i++) {
    try {
      if ((await fetch(url, init)).ok) return;
    } catch {}
    await sleep(500);
  }
  throw new Error(`${url} did not answer`);
}

/** The legend of a series: the target's legendFormat with {{label}} filled in. */
const legend = (format: string | undefined, labels: Record<string, string>) =>
  (format ?? '').replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k: string) => labels[k] ?? '') || JSON.stringify(labels);

async function main() {
  const bench = await createBenchContext('dashboard');
  const { ctx } = bench;
  const sshd = await startSshd({ maxStartups: 100 });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-dashboard-'));
  const children: ChildProcess[] = [];
  try {
    // The fleet: servers on the local sshd, two unreachable ones, alert rules, a maintenance window.
    const ids = await createServers(ctx, sshd, SERVERS, { monitor_update_interval: '5s' });
    for (const [i, id] of ids.entries())
      await ctx.db.rootServer.update({ where: { id }, data: { name: `web-${String(i + 1).padStart(2, '0')}` } });
    const dead = ids.slice(-2);
    await ctx.db.rootServer.updateMany({ where: { id: { in: dead } }, data: { port: await freePort(), host_key: null } });
    await ctx.db.alertRule.createMany({
      data: [
        { name: 'disk at 20 %', metric: 'disk_percent', threshold: 20 },
        { name: 'down', metric: 'server_offline' },
        { name: 'busy', metric: 'cpu_percent', threshold: 95, duration_seconds: 300 },
      ],
    });
    await ctx.db.maintenanceWindow.create({
      data: { root_server_ids: ids.slice(0, 4), starts_at: new Date(), ends_at: new Date(Date.now() + 3600_000), reason: 'kernel upgrade' },
    });
    const partner = await ctx.db.partner.create({ data: { name: 'Dashboard', email: 'dash@example.com' } });
    const states = ['running', 'running', 'running', 'running', 'suspended', 'draft', 'deploying', 'failed'] as const;
    const usage = ['ok', 'ok', 'ok', 'ok', 'warning', 'exceeded'] as const;
    await ctx.db.subscription.createMany({
      data: Array.from({ length: 60 }, (_, i) => ({
        name: `SUB${i}`,
        partner_id: partner.id,
        state: states[i % states.length]!,
        usage_state: usage[i % usage.length]!,
      })),
    });
    const hook = await ctx.db.webhook.create({ data: { token: 'd'.repeat(64), model_name: 'res.partner', rec_id: partner.id } });
    const { token } = await createAuthService(ctx).createAdmin('dashboard@example.com');

    // The service: API and workers in one process.
    const port = await freePort();
    const svc = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...bench.env, PORT: String(port), HOST: '127.0.0.1', SVC_ROLE: 'all' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(svc);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(`${base}/healthz`);
    const auth = { authorization: `Bearer ${token}` };
    for (const id of ids) await fetch(`${base}/api/v1/root-servers/${id}/actions/start_monitor`, { method: 'POST', headers: auth });

    // Prometheus scraping it, as an operator would configure it.
    const promPort = await freePort();
    await writeFile(path.join(dir, 'token'), token);
    await writeFile(
      path.join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 5s\nscrape_configs:\n  - job_name: svc\n    authorization:\n      credentials_file: ${dir}/token\n    static_configs:\n      - targets: ['127.0.0.1:${port}']\n`,
    );
    const prom = spawn(
      '/usr/bin/prometheus',
      [`--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${promPort}`],
      { stdio: ['ignore', 'ignore', 'ignore'] },
    );
    children.push(prom);
    const promApi = `http://127.0.0.1:${promPort}/api/v1`;
    await waitFor(`http://127.0.0.1:${promPort}/-/ready`);

    // Traffic while Prometheus records: webhook calls (good and unknown tokens), API reads, a stop and start.
    const started = Date.now();
    let tick = 0;
    while (Date.now() - started < MINUTES * 60_000) {
      tick++;
      const calls = 2 + (tick % 5);
      for (let i = 0; i < calls; i++) {
        const good = i % 4 !== 3;
        await fetch(`${base}/svc/webhook/${good ? hook.token : 'e'.repeat(64)}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ message: `tick ${tick}` }),
        });
      }
      await fetch(`${base}/api/v1/root-servers?limit=20`, { headers: auth });
      if (tick % 60 === 20) await fetch(`${base}/api/v1/root-servers/${ids[5]}/actions/stop_monitor`, { method: 'POST', headers: auth });
      if (tick % 60 === 40) await fetch(`${base}/api/v1/root-servers/${ids[5]}/actions/start_monitor`, { method: 'POST', headers: auth });
      await sleep(1000);
    }

    // Every panel's queries on Prometheus, over the time recorded.
    const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'docs/grafana/svc.json'), 'utf8')) as { title: string; panels: Panel[] };
    const end = Math.floor(Date.now() / 1000);
    const start = Math.floor(started / 1000) + 30;
    const panels = [];
    for (const panel of dashboard.panels) {
      const series: { name: string; points: [number, number][] }[] = [];
      for (const target of panel.targets ?? []) {
        const expr = target.expr.replaceAll('$__rate_interval', RATE_INTERVAL);
        const url = target.instant
          ? `${promApi}/query?query=${encodeURIComponent(expr)}&time=${end}`
          : `${promApi}/query_range?query=${encodeURIComponent(expr)}&start=${start}&end=${end}&step=5`;
        const answer = (await (await fetch(url)).json()) as {
          status: string;
          error?: string;
          data: { result: { metric: Record<string, string>; values?: [number, string][]; value?: [number, string] }[] };
        };
        if (answer.status !== 'success') throw new Error(`${panel.title}: ${expr}: ${answer.error}`);
        for (const r of answer.data.result) {
          const values = r.values ?? (r.value ? [r.value] : []);
          series.push({ name: legend(target.legendFormat, r.metric), points: values.map(([t, v]) => [t, Number(v)]) });
        }
      }
      panels.push({ ...panel, series });
    }
    const page = renderPage(dashboard.title, panels, { start, end });
    await writeFile(path.join(dir, 'dashboard.html'), page);

    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
    try {
      const tab = await browser.newPage({ viewport: { width: 1600, height: 900 } });
      await tab.goto(`file://${dir}/dashboard.html`);
      await tab.waitForFunction('window.drawn === true');
      await tab.screenshot({ path: OUT, fullPage: true });
    } finally {
      await browser.close();
    }
    console.log(`wrote ${path.relative(ROOT, OUT)} (${panels.length} panels, ${MINUTES} min of data)`);
  } finally {
    for (const child of children) {
      if (child.exitCode !== null) continue;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(20_000)]);
    }
    await sshd.stop();
    await bench.close();
    await rm(dir, { recursive: true, force: true });
  }
}

type DrawnPanel = Panel & { series: { name: string; points: [number, number][] }[] };

/** The dashboard as a page: a 24-column grid like Grafana's, each panel drawn from its query results. */
function renderPage(title: string, panels: DrawnPanel[], range: { start: number; end: number }) {
  const uplotJs = readFileSync(path.join(ROOT, 'node_modules/uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(path.join(ROOT, 'node_modules/uplot/dist/uPlot.min.css'), 'utf8');
  const data = JSON.stringify({ panels, range });
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>${uplotCss}
body{margin:0;background:#111217;color:#ccccdc;font:12px Inter,Helvetica,Arial,sans-serif}
header{padding:10px 16px;font-size:16px;color:#fff;border-bottom:1px solid #2c2d33}
header small{color:#8e8e9a;font-size:12px;margin-left:12px}
#grid{position:relative;margin:8px}
.panel{position:absolute;background:#181b1f;border:1px solid #2c2d33;border-radius:2px;box-sizing:border-box;overflow:hidden}
.panel h3{margin:0;padding:6px 8px;font-size:12px;font-weight:500;color:#ccccdc}
.row{position:absolute;font-size:14px;color:#fff;padding:4px 2px}
.stat{display:flex;flex-wrap:wrap;gap:4px;padding:4px 8px}
.stat div{flex:1 1 40%;border-radius:2px;padding:6px;color:#fff;min-width:60px}
.stat b{display:block;font-size:22px}
.bar{margin:3px 8px;font-size:11px}.bar span{display:block;height:10px;background:linear-gradient(90deg,#73bf69,#fade2a,#f2495c);border-radius:2px}
.u-legend{font-size:10px;color:#ccccdc}.u-legend .u-marker{width:8px;height:8px}
</style></head><body>
<header>${title}<small>rendered from docs/grafana/svc.json with a real Prometheus scrape (panels drawn with uPlot; Grafana not installed)</small></header>
<div id="grid"></div>
<script>${uplotJs}</script>
<script>
const { panels, range } = ${data};
const COL = (window.innerWidth - 16) / 24, ROW = 30;
const palette = ['#73bf69','#f2cc0c','#5794f2','#ff9830','#f2495c','#b877d9','#8ab8ff','#96d98d','#ffb357','#ca95e5'];
const fmt = (unit, v) => v == null || Number.isNaN(v) ? '–' : unit === 'percentunit' ? (v * 100).toFixed(1) + ' %'
  : unit === 's' ? (v >= 1 ? v.toFixed(2) + ' s' : (v * 1000).toFixed(0) + ' ms') : unit === 'reqps' || unit === 'ops' ? v.toFixed(2) + '/s'
  : unit === 'bool_on_off' ? (v ? 'up' : 'DOWN') : Math.abs(v) >= 100 ? v.toFixed(0) : +v.toFixed(2) + '';
const grid = document.getElementById('grid');
let bottom = 0;
for (const p of panels) {
  const g = p.gridPos, unit = p.fieldConfig?.defaults?.unit;
  bottom = Math.max(bottom, (g.y + g.h) * ROW);
  if (p.type === 'row') { const r = document.createElement('div'); r.className = 'row'; r.textContent = p.title;
    Object.assign(r.style, { left: '0px', top: g.y * ROW + 'px' }); grid.append(r); continue; }
  const el = document.createElement('div'); el.className = 'panel';
  Object.assign(el.style, { left: g.x * COL + 'px', top: g.y * ROW + 'px', width: g.w * COL - 6 + 'px', height: g.h * ROW - 6 + 'px' });
  el.innerHTML = '<h3>' + p.title + '</h3>'; grid.append(el);
  const last = (s) => s.points.length ? s.points[s.points.length - 1][1] : NaN;
  if (p.type === 'stat') {
    const box = document.createElement('div'); box.className = 'stat'; el.append(box);
    for (const s of p.series) { const steps = p.fieldConfig?.defaults?.thresholds?.steps ?? [];
      const v = last(s); let color = '#3274d9'; for (const st of steps) if (st.value == null || v >= st.value) color = {green:'#56a64b',red:'#e02f44',orange:'#ff780a',blue:'#3274d9'}[st.color] ?? st.color;
      const d = document.createElement('div'); d.style.background = color; d.innerHTML = s.name + '<b>' + fmt(unit, v) + '</b>'; box.append(d); }
    continue;
  }
  if (p.type === 'bargauge') {
    for (const s of [...p.series].sort((a, b) => last(b) - last(a))) { const v = last(s);
      const d = document.createElement('div'); d.className = 'bar'; d.innerHTML = s.name + ' — ' + fmt(unit, v) + '<span style="width:' + Math.max(1, v * 100) + '%"></span>'; el.append(d); }
    continue;
  }
  const times = [...new Set(p.series.flatMap((s) => s.points.map((x) => x[0])))].sort((a, b) => a - b);
  const cols = p.series.map((s) => { const m = new Map(s.points); return times.map((t) => m.has(t) ? m.get(t) : null); });
  const opts = { width: g.w * COL - 14, height: g.h * ROW - 70, legend: { show: true },
    scales: { x: { time: true }, y: { range: (u, lo, hi) => [p.fieldConfig?.defaults?.min ?? Math.min(0, lo ?? 0), p.fieldConfig?.defaults?.max ?? (hi > 0 ? hi * 1.1 : 1)] } },
    axes: [{ stroke: '#8e8e9a', grid: { stroke: '#2c2d33' }, ticks: { stroke: '#2c2d33' } },
           { stroke: '#8e8e9a', grid: { stroke: '#2c2d33' }, ticks: { stroke: '#2c2d33' }, size: 60, values: (u, vals) => vals.map((v) => fmt(unit, v)) }],
    series: [{}, ...p.series.map((s, i) => ({ label: s.name, stroke: palette[i % palette.length], width: 1.5, fill: palette[i % palette.length] + '22', value: (u, v) => fmt(unit, v) }))] };
  if (p.series.length === 0) { el.insertAdjacentHTML('beforeend', '<div style="padding:20px;color:#8e8e9a">No data</div>'); continue; }
  new uPlot(opts, [times, ...cols], el);
}
grid.style.height = bottom + 'px';
window.drawn = true;
</script></body></html>`;
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
