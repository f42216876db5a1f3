// The fixture of the customer-instance tests: the app with its workers, a real SMTP server for the
// customer's mails, a real sshd as the Odoo host (its sudo NOPASSWD user, so commands run as root)
// with ODOO_BASE_PATH in a temporary directory, and useLifecycle's Odoo-shaped template naming
// that host as its root server, with the template's filestore files written there.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { confirmedRootServer, request } from './api.js';
import { useTestApp, type TestApp } from './app.js';
import { useLifecycle, type Lifecycle } from './lifecycle.js';
import { useSmtpServer, type TestSmtpServer } from './smtp.js';
import { TEST_USERS, useSshd, type Sshd } from './sshd.js';

export interface OdooHostFixture {
  t: TestApp;
  smtp: TestSmtpServer;
  sshd: Sshd;
  /** ODOO_BASE_PATH */
  base: string;
  fx: Lifecycle;
  rootServerId: number;
  /** Where a database's filestore is on the host. */
  filestore(database: string): string;
}

/** `files`: the template's filestore, relative path → content. */
export function useOdooHost(files: Record<string, string | Buffer>): OdooHostFixture {
  const f = {} as OdooHostFixture;
  f.filestore = (database) => path.join(f.base, 'data', 'filestore', database);
  f.smtp = useSmtpServer();
  f.sshd = useSshd();
  beforeAll(async () => {
    f.base = await mkdtemp(path.join(tmpdir(), 'svc-odoo-'));
  });
  afterAll(async () => {
    if (f.base) await rm(f.base, { recursive: true, force: true });
  });
  f.t = useTestApp({
    workers: true,
    env: () => ({ SMTP_URL: f.smtp.url, ODOO_BASE_PATH: f.base, SUBSCRIPTION_URL: 'https://{database_name}.odoo.test' }),
  });
  f.fx = useLifecycle(f.t);
  beforeAll(async () => {
    const { t } = f;
    const root = await confirmedRootServer(t.app, t.as.operator, f.sshd, {
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    f.rootServerId = root.id;
    const res = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${f.fx.templateId}`,
      payload: { root_server_id: root.id },
    });
    expect(res.statusCode, res.body).toBe(200);
    for (const [file, content] of Object.entries(files)) {
      const at = path.join(f.filestore(f.fx.templateDb), file);
      await mkdir(path.dirname(at), { recursive: true });
      await writeFile(at, content);
    }
  });
  return f;
}
