// What the service and its CLI say when something is in the way, run as a user runs them (child
// processes on a test database): a port already in use is one line naming PORT, and no worker
// starts; create-token for an unknown e-mail is one line saying how to make the user; create-admin
// run again for the same address says so and takes no new user id (the README runs it twice).
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/context.js';
import { databaseUrl } from './helpers/pg.js';
import { runEntry } from './helpers/spawn.js';

let ctx: TestContext;
let env: Record<string, string>;

beforeAll(async () => {
  ctx = await createTestContext();
  env = {
    DATABASE_URL: databaseUrl(ctx.dbName),
    QUEUE_PREFIX: ctx.config.QUEUE_PREFIX,
    SVC_MASTER_KEY_FILE: ctx.config.SVC_MASTER_KEY_FILE,
  };
});
afterAll(async () => {
  await ctx.cleanup();
});

describe('npm start', () => {
  let blocker: Server;
  afterAll(async () => {
    await new Promise((resolve) => blocker?.close(resolve));
  });

  it('on a port in use: one line naming PORT, exit status 1, and no worker started', async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const result = runEntry('src/main.ts', [], { ...env, PORT: String(port), HOST: '127.0.0.1' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual([
      `Port ${port} on 127.0.0.1 is already in use (PORT, HOST): stop what listens there, or start with another PORT`,
    ]);
    expect(result.stdout).not.toContain('workers started');
    expect(result.stdout).not.toContain('"msg":"svc started"');
  });
});

describe('npm run cli', () => {
  it('create-token for an e-mail no user has: one line saying how to make one, exit status 1, no stack', () => {
    const result = runEntry('src/cli.ts', ['create-token', '--email', 'nobody@example.com'], env);
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr.trim().split('\n')).toEqual([
      'No user has the e-mail nobody@example.com. Make an administrator with: npm run cli -- create-admin --email nobody@example.com ' +
        '(or a user of another group with POST /api/v1/users)',
    ]);
  });

  it('create-admin twice for one address: the second says the administrator existed, and no user id is used up', async () => {
    const first = runEntry('src/cli.ts', ['create-admin', '--email', 'Boss@Example.com'], env);
    expect(first.status, first.stderr).toBe(0);
    const [firstLine, firstToken] = first.stdout.trim().split('\n');
    expect(firstLine).toMatch(/^Created the administrator boss@example\.com \(user id (\d+)\)\. A new API token \(shown once\):$/);
    const id = Number(/user id (\d+)/.exec(firstLine!)![1]);

    const second = runEntry('src/cli.ts', ['create-admin', '--email', 'boss@example.com'], env);
    expect(second.status, second.stderr).toBe(0);
    const [secondLine, secondToken] = second.stdout.trim().split('\n');
    expect(secondLine).toBe(
      `boss@example.com was already an administrator (user id ${id}); its other tokens stay valid. A new API token (shown once):`,
    );
    expect(secondToken).not.toBe(firstToken);
    // The next user gets the next id: the second run took none from the sequence.
    const next = await ctx.db.user.create({ data: { email: 'next@example.com', group: 'user' } });
    expect(next.id).toBe(id + 1);
  });
});
