// The asset bundles of a template's first pages, made at build and update (host/template_assets.py,
// through `odoo-bin shell` as Odoo's user, the file on standard input): without them each copy's
// first page made them again (seconds of CPU, ~10 s of the first sign-in). The bundles are
// attachments in the database with their files in its filestore, so a copy (CREATE DATABASE …
// TEMPLATE and the filestore copied with it) serves them at once.
import { hostProgram } from '../core/host-program.js';
import type { RemoteSession } from '../servers/index.js';
import type { OdooLayout } from './odoo-layout.js';
import { asOdoo, odooBin } from './odoo-once.js';

const SCRIPT = hostProgram(new URL('./host/template_assets.py', import.meta.url));
const ASSETS_TIMEOUT_MS = 10 * 60_000;

/** `odoo-bin shell` on `database` as Odoo's user (asOdoo) with the service's configuration; the program comes on stdin. */
export const odooShell = (l: OdooLayout, source: string, database: string) =>
  asOdoo(l, { source, database, kind: 'assets', output: 'answer' }, odooBin(l, database, [], 'shell'));

/** Makes the first pages' bundles in `database`; answers their URLs, or throws with Odoo's words. */
export async function makeFirstPageAssets(session: RemoteSession, l: OdooLayout, source: string, database: string): Promise<string[]> {
  const res = await session.check(odooShell(l, source, database), 'making its asset bundles failed', {
    stdin: SCRIPT,
    timeoutMs: ASSETS_TIMEOUT_MS,
    label: `make the asset bundles of ${database}'s first pages (odoo-bin shell < host/template_assets.py)`,
  });
  const line = res.stdout.split('\n').find((s) => s.startsWith('assets='));
  if (!line) throw new Error(`making its asset bundles failed: ${session.mask(`${res.stdout}\n${res.stderr}`.trim()).slice(-2000)}`);
  return JSON.parse(line.slice('assets='.length)) as string[];
}
