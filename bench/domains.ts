// npm run bench:domains [-- --domains 20] [--spread 1] [--sites 1000] [--changes 10]
// Customer domains through the real service: Caddy on a local sshd host (the machine's, run as root
// by the service), Pebble as the ACME server and pebble-challtestsrv as the DNS server of Pebble and
// of the service, a stand-in Odoo, real customer databases deployed from an Odoo-shaped template.
// 1. --domains domains, one started every --spread seconds: from the DNS record set right (then
//    the verify action at once, as the customer's "verify" would) to HTTPS answered by Odoo with a
//    chain valid to Pebble's root. Target p95 ≤ 60 s.
// 2. With --sites site files on the host: one add and one remove of a site (write, caddy validate,
//    caddy reload: the service's own code), --changes times each. Target ≤ 2 s each.
// Prints met/missed per target. Needs root (sshd, sudo, Caddy on 80 and 443).
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createServer } from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { sleep } from '../src/core/sleep.js';
import { caddySites, siteConfig, siteFileOf } from '../src/domains/caddy-sites.js';
import { openRemoteSession } from '../src/servers/remote-session.js';
import { startAcmeLab, takeCaddyMachine } from '../test/helpers/acme.js';
import { createOdooTemplate } from '../test/helpers/odoo-template.js';
import { adminQuery, dropDatabase } from '../test/helpers/pg.js';
import { startSshd } from '../test/helpers/sshd.js';
import { completedJob, registerOdooHost, startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const DOMAINS = arg('domains', 20);
const SPREAD_S = arg('spread', 1);
const SITES = arg('sites', 1000);
const CHANGES = arg('changes', 10);

const run = promisify(execFile);
/** Where the Caddy the service starts as root keeps its certificates. */
const CADDY_STORAGE = '/root/.local/share/caddy';
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** Status of GET / over HTTPS to 127.0.0.1:443 with `hostname` as SNI, the chain checked against `ca`; 0 when refused. */
function httpsStatus(hostname: string, ca: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port: 443, servername: hostname, headers: { host: hostname }, ca, timeout: 5000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

async function main() {
  const machine = await takeCaddyMachine();
  const lab = await startAcmeLab();
  const sshd = await startSshd();
  const odoo = createServer((_req, res) => res.end('odoo stand-in'));
  await new Promise<void>((r) => odoo.listen(0, '127.0.0.1', r));
  const odooPort = (odoo.address() as { port: number }).port;
  const base = path.join(os.tmpdir(), `svc-bench-domains-${process.pid}`);
  const bench = await createBenchContext('domains', {
    ACME_CA_URL: lab.directory,
    ACME_EMAIL: 'ops@bench.test',
    ACME_CA_ROOT_PEM: lab.listenerRootFile,
    ODOO_HTTP_PORT: String(odooPort),
    DNS_CLOUDFLARE_SERVERS: lab.dns,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
  });
  const { ctx } = bench;
  const template = `${ctx.config.QUEUE_PREFIX}_tpl`;
  let closeAll = async () => {};
  try {
    console.log(`load average at start: ${loadavg()}; ${os.cpus().length} × ${os.cpus()[0]?.model}`);
    await createOdooTemplate(template);
    const service = await startBenchService(ctx);
    closeAll = service.close;
    const { api } = service;
    const job = (jobId: string) => completedJob(api, jobId);
    const { root, template: tpl } = await registerOdooHost(api, sshd, template, async (rootId) =>
      job((await api<{ job_id: string }>('POST', `/root-servers/${rootId}/actions/setup_proxy`)).job_id),
    );
    const partner = await api('POST', '/partners', { name: 'Bench Customer', email: 'customer@bench.test' });

    // 1. DNS right → HTTPS served, per domain.
    const ca = await lab.issuingRoot();
    const subs: { id: number; database_name: string }[] = [];
    for (let i = 0; i < DOMAINS; i++) {
      const sub = await api<{ id: number; database_name: string }>('POST', '/subscriptions', {
        name: `Bench ${i}`,
        partner_id: partner.id,
        database_template_id: tpl.id,
        database_name: `${template}_c${i}`,
      });
      await api('POST', `/subscriptions/${sub.id}/actions/confirm`);
      await job((await api<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/deploy`)).job_id);
      subs.push(sub);
    }
    const tag = Date.now().toString(36);
    const hostnames = subs.map((_, i) => `erp${i}-${tag}.bench.test`);
    const domains = await Promise.all(
      subs.map((sub, i) => api('POST', '/domains', { subscription_id: sub.id, hostname: hostnames[i], is_primary: true })),
    );
    console.log(`${DOMAINS} subscriptions deployed, their domains pending; load average ${loadavg()}`);

    const live = async (i: number) => {
      const start = performance.now();
      await lab.setA(hostnames[i]!, ['127.0.0.1']);
      await api('POST', `/domains/${domains[i]!.id}/actions/verify`);
      while ((await httpsStatus(hostnames[i]!, ca)) !== 200) {
        if (performance.now() - start > 180_000) throw new Error(`${hostnames[i]} not served after 180 s`);
        await sleep(100);
      }
      return performance.now() - start;
    };
    const runs: Promise<number>[] = [];
    for (let i = 0; i < DOMAINS; i++) {
      runs.push(live(i));
      await sleep(SPREAD_S * 1000);
    }
    const times = await Promise.all(runs);
    // HTTPS may answer a moment before the job has recorded the domain active.
    for (let i = 0; i < 100 && (await ctx.db.domain.count({ where: { state: 'pending_dns' } })) > 0; i++) await sleep(100);
    const states = await ctx.db.domain.groupBy({ by: ['state'], _count: true });
    console.log(`domain states: ${states.map((s) => `${s.state} ${s._count}`).join(', ')}`);
    for (const d of await ctx.db.domain.findMany({ where: { state: { not: 'active' } } })) {
      console.log(`  ${d.hostname}: ${d.state}, ${d.last_error}`);
    }
    console.log(
      `DNS record right → HTTPS served (${DOMAINS} domains, one every ${SPREAD_S} s): p50 ${secs(pct(times, 50))}, p95 ${secs(pct(times, 95))}, max ${secs(Math.max(...times))}`,
    );
    const issuanceLine = `${verdict(pct(times, 95) <= 60_000)}: DNS right → HTTPS with a valid chain p95 ${secs(pct(times, 95))} ≤ 60 s`;

    // 2. --sites sites on the host: the fillers are written as the service writes them, with a
    // certificate each in Caddy's storage as if issued before (a host's domains are live: otherwise
    // Caddy would spend the measurement asking for hundreds of certificates at every reload).
    const fillers = SITES - DOMAINS;
    let t0 = performance.now();
    const storage = path.join(CADDY_STORAGE, 'certificates', `${new URL(lab.directory).host.replace(':', '-')}-dir`);
    const key = path.join(storage, 'filler.key');
    await mkdir(storage, { recursive: true });
    await run('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', key]);
    for (let i = 0; i < fillers; i++) {
      const site = { hostname: `filler${i}-${tag}.bench.test`, database: `bench_filler_${i}`, odooPort };
      const dir = path.join(storage, site.hostname);
      await mkdir(dir, { recursive: true });
      await run('openssl', [
        ...['req', '-x509', '-key', key, '-days', '90', '-subj', `/CN=${site.hostname}`],
        ...['-addext', `subjectAltName=DNS:${site.hostname}`, '-out', path.join(dir, `${site.hostname}.crt`)],
      ]);
      await copyFile(key, path.join(dir, `${site.hostname}.key`));
      await writeFile(
        path.join(dir, `${site.hostname}.json`),
        JSON.stringify({ sans: [site.hostname], issuer_data: { url: lab.directory } }),
      );
      await writeFile(siteFileOf(site), siteConfig(site));
    }
    console.log(`${fillers} more site files and their certificates made in ${secs(performance.now() - t0)}`);
    t0 = performance.now();
    await run('caddy', ['reload', '--config', '/etc/caddy/Caddyfile', '--adapter', 'caddyfile']);
    console.log(`loaded (${SITES} sites in all) in ${secs(performance.now() - t0)}; load average ${loadavg()}`);

    const server = await ctx.db.rootServer.findUniqueOrThrow({ where: { id: root.id } });
    const session = await openRemoteSession(ctx, server, { user_id: null });
    const adds: number[] = [];
    const removes: number[] = [];
    try {
      const sites = caddySites(session);
      for (let i = 0; i < CHANGES; i++) {
        const site = { hostname: `change${i}-${tag}.bench.test`, database: `bench_change_${i}`, odooPort };
        t0 = performance.now();
        const { file } = await sites.write(site);
        adds.push(performance.now() - t0);
        t0 = performance.now();
        await sites.remove(file);
        removes.push(performance.now() - t0);
      }
    } finally {
      session.close();
    }
    console.log(`add a site with ${SITES} on the host (write, validate, reload): ${adds.map(secs).join(', ')}`);
    console.log(`remove a site with ${SITES} on the host: ${removes.map(secs).join(', ')}`);
    console.log(`load average at the end: ${loadavg()}`);
    console.log(issuanceLine);
    console.log(
      `${verdict(Math.max(...adds, ...removes) <= 2000)}: one add (p50 ${secs(pct(adds, 50))}, max ${secs(Math.max(...adds))}) or remove (p50 ${secs(pct(removes, 50))}, max ${secs(Math.max(...removes))}) with ${SITES} domains on one host ≤ 2 s`,
    );
  } finally {
    await closeAll();
    const dbs = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${template}%`]);
    for (const { datname } of dbs) await dropDatabase(datname);
    await bench.close();
    await machine.release();
    await lab.stop();
    await sshd.stop();
    await new Promise((r) => odoo.close(r));
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);
