// setup_proxy: makes a root server the front of its tenants' own addresses (SUBSCRIPTION_URL's and
// STAGING_URL's host patterns: tenant-sites.ts) and the HTTPS front of its customer domains. Caddy
// is installed from the OS packages when missing; the main Caddyfile names the ACME server
// (ACME_CA_URL, ACME_EMAIL, and ACME_CA_ROOT_PEM's root for a private one), svc's on-demand TLS
// question, the tenants' site and imports the site files the domains write; it is checked with
// `caddy validate` before it replaces the old one, then Caddy is reloaded or started.
import { readFile } from 'node:fs/promises';
import type { Job } from 'bullmq';
import type { Config } from '../core/config.js';
import { UserError } from '../core/errors.js';
import {
  CADDY_ACME_ROOT,
  CADDY_SITES_DIR,
  CADDYFILE,
  ENABLE_CADDYFILE,
  INSTALL_CADDY,
  mainCaddyfile,
  WRITE_NEW_CADDYFILE,
  writeFileFromStdin,
} from './caddy.js';
import type { RemoteSession } from './remote-session.js';
import { tenantHostPatterns, tenantSitesConfig, tlsAskUrl } from './tenant-sites.js';

const INSTALL_TIMEOUT_MS = 15 * 60_000;
const STEP_TIMEOUT_MS = 2 * 60_000;

type ProxyConfig = Pick<
  Config,
  'ACME_CA_URL' | 'ACME_EMAIL' | 'ACME_CA_ROOT_PEM' | 'SUBSCRIPTION_URL' | 'STAGING_URL' | 'BASE_URL' | 'ODOO_HTTP_PORT' | 'TENANT_TLS_DNS'
>;

/** The host as setup_proxy needs it: which port its Odoo serves (the one svc set up, else ODOO_HTTP_PORT). */
export interface ProxyHost {
  id: number;
  odoo_http_port: number | null;
}

/** The PEM root named by ACME_CA_ROOT_PEM, checked to be one (it is copied to the host as is). */
async function acmeRootPem(file: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new UserError(`ACME_CA_ROOT_PEM: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (!/^-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+-----END CERTIFICATE-----\s*$/m.test(pem)) {
    throw new UserError(`ACME_CA_ROOT_PEM: ${file} holds no PEM certificate`);
  }
  return pem;
}

export async function setupProxy(config: ProxyConfig, server: ProxyHost, session: RemoteSession, job: Job) {
  // Read first: a bad file or address stops the job before anything changes on the host.
  const root = config.ACME_CA_ROOT_PEM ? await acmeRootPem(config.ACME_CA_ROOT_PEM) : null;
  const odooPort = server.odoo_http_port ?? config.ODOO_HTTP_PORT;
  const patterns = tenantHostPatterns(config);
  const tenantSites = tenantSitesConfig(patterns, odooPort, `root server ${server.id}`, config.TENANT_TLS_DNS);
  const onDemandAsk = patterns.some((p) => p.https) && !config.TENANT_TLS_DNS ? tlsAskUrl(config) : undefined;

  await job.updateProgress({ step: 'install', percent: 5 });
  const installed = await session.check(INSTALL_CADDY, 'Installing Caddy failed', { timeoutMs: INSTALL_TIMEOUT_MS });

  await job.updateProgress({ step: 'configure', percent: 60 });
  if (root) {
    await session.check(writeFileFromStdin(CADDY_ACME_ROOT), `Writing ${CADDY_ACME_ROOT} failed`, {
      stdin: root,
      timeoutMs: STEP_TIMEOUT_MS,
    });
  }
  const caddyfile = mainCaddyfile({
    acmeCaUrl: config.ACME_CA_URL,
    acmeEmail: config.ACME_EMAIL,
    acmeRoot: root !== null,
    tenantSites,
    onDemandAsk,
  });
  await session.check(WRITE_NEW_CADDYFILE, 'Writing the Caddyfile failed', {
    stdin: caddyfile,
    timeoutMs: STEP_TIMEOUT_MS,
    label: `${WRITE_NEW_CADDYFILE} <<EOF\n${caddyfile}EOF`,
  });

  await job.updateProgress({ step: 'enable', percent: 80 });
  const enabled = await session.check(ENABLE_CADDYFILE, 'Caddy did not take the configuration', { timeoutMs: STEP_TIMEOUT_MS });
  await job.updateProgress({ step: 'done', percent: 100 });
  return {
    caddy_version: session.mask(installed.stdout).trim().split('\n').pop() ?? '',
    caddyfile: CADDYFILE,
    sites_dir: CADDY_SITES_DIR,
    acme_ca: config.ACME_CA_URL,
    // What the tenants' own addresses are served as: Caddy's site address and how, per pattern.
    tenant_sites: patterns.map((p) => ({
      variable: p.variable,
      site: `${p.https ? 'https' : 'http'}://${p.siteHost}${p.explicitPort ? `:${p.port}` : ''}`,
      tls: !p.https ? 'none' : config.TENANT_TLS_DNS ? 'dns_wildcard' : 'on_demand',
      odoo_port: odooPort,
    })),
    tls_ask: onDemandAsk ?? null,
    status: session.mask(enabled.stdout).trim(),
  };
}
