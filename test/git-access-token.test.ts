// A git account's access_token is sent in the Authorization header: a value a header cannot carry
// is refused when written (400 naming the field), and one stored before that rule is a clear 400
// user_error when used — not a 500 — with nothing sent. Real API, PostgreSQL, and a loopback
// stand-in for the git host that records what reaches it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';

let host: RecordingServer;
beforeAll(async () => {
  host = await startRecordingServer((_req, res) => sendJson(res, 201, { id: 1 }));
});
const t = useTestApp({ env: () => ({ GIT_API_URL: host.url }) });
afterAll(async () => {
  await host?.close();
});

const fieldsOf = (res: { json(): { error: { details: { fields: { field: string }[] } } } }) =>
  res.json().error.details.fields.map((d) => d.field);

describe('git account access_token', () => {
  it('is refused at create and PATCH with characters an HTTP header cannot carry', async () => {
    const ok = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: 'ghp_ok' } });
    expect(ok.statusCode, ok.body).toBe(201);
    for (const token of ['ghp_€', 'ghp_é', 'ghp_a\nX-Other: 1', 'ghp a']) {
      const created = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: token } });
      expect(created.statusCode, token).toBe(400);
      expect(created.json().error.code).toBe('validation_error');
      expect(fieldsOf(created)).toEqual(['body.access_token']);
      const patched = await request(t.app, t.as.admin, {
        method: 'PATCH',
        url: `/api/v1/git-accounts/${ok.json().id}`,
        payload: { access_token: token },
      });
      expect(patched.statusCode, token).toBe(400);
      expect(fieldsOf(patched)).toEqual(['body.access_token']);
    }
  });

  it('one stored before that rule is a clear 400 when used, and nothing is sent', async () => {
    const account = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: 'ghp_x' } });
    await t.ctx.db.gitAccount.update({ where: { id: account.json().id }, data: { access_token: await t.ctx.secretBox.encrypt('ghp_€') } });
    const repo = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: 'acme/shop', branch_name: 'main', git_account_id: account.json().id },
    });
    expect(repo.statusCode, repo.body).toBe(201);
    const res = await request(t.app, t.as.admin, {
      method: 'POST',
      url: `/api/v1/git-repositories/${repo.json().id}/actions/link_git_webhook`,
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'user_error',
      message: expect.stringMatching(/authorization header would carry characters an HTTP header cannot carry/),
    });
    expect(res.body).not.toContain('ghp_€');
    expect(host.calls).toHaveLength(0);
  });
});
