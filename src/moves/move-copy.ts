// The copying parts of a move: the database on the target server (made empty, owned by the target
// host's role, then filled by pg_dump | pg_restore as that role) and the filestore streamed from one
// host to the other through the service.
import { PassThrough, Writable } from 'node:stream';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import { assertTenantRole, basePathOf, createEmptyDatabase, databaseLocale, filestorePath, onServer } from '../instances/index.js';
import { openRemoteSession, type RemoteSession } from '../servers/index.js';
import { dumpAndRestore, type PgConnection } from '../staging/index.js';
import { listFilesScript, receiveScript, sendMissingScript } from './move-scripts.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Audit = { user_id: number | null; job_id: string };

const COPY_TIMEOUT_MS = 2 * 60 * 60_000;

/** The new, empty database on the target: owned by `owner` (checked to be a tenant's role), the source's encoding and collation. */
export async function createTargetDatabase(ctx: Ctx, from: PostgresqlServer, to: PostgresqlServer, name: string, owner: string) {
  const locale = await onServer(ctx.secretBox, from, (q) => databaseLocale(q, name));
  if (!locale) throw new UserError(`Database ${name} does not exist on ${from.ip}:${from.port}`);
  await onServer(ctx.secretBox, to, async (q) => {
    await assertTenantRole(q, owner, `The moved database ${name}`);
    await createEmptyDatabase(q, name, owner, locale);
  });
}

/**
 * The whole database, read by the source server's administrator (it alone still connects to the
 * frozen database: CONNECTION LIMIT 0) and written by the target host's role: restoring runs the
 * tenant's own SQL (its CHECK functions), which must never run with more than the tenant's rights.
 */
export async function copyDatabase(
  ctx: Ctx,
  from: PostgresqlServer,
  to: PostgresqlServer,
  role: { user: string; password: string | null },
  name: string,
) {
  const admin: PgConnection = {
    host: from.ip,
    port: from.port,
    user: from.username ?? 'postgres',
    password: await ctx.secretBox.reveal(from.password),
  };
  const tenant: PgConnection = { host: to.ip, port: to.port, user: role.user, password: await ctx.secretBox.reveal(role.password) };
  return dumpAndRestore(admin, tenant, name, name, COPY_TIMEOUT_MS, ctx.config.PATH);
}

/**
 * One pass of the filestore from one host to the other: the files the target lacks, as a tar
 * stream through the service (never more than a pipe's worth held here). Answers what each side said.
 */
/**
 * The sender's output on its way into the receiver's input, dropped once that input is closed. A
 * receiving tar stops reading at the archive's end marker and its command ends; the SSH client then
 * destroys the input it did not read to the end. Piped straight into it, the sender's channel was
 * unpiped and paused with the archive's padding unread: its command had ended, but its channel never
 * did, and the move waited in its freeze (the instance in maintenance) until the copy's timeout.
 */
export function forwardWhileOpen(to: Writable): Writable {
  return new Writable({
    write(chunk, _encoding, done) {
      if (to.destroyed || to.writableEnded || to.write(chunk)) return done();
      const go = () => {
        to.off('drain', go);
        to.off('close', go);
        done();
      };
      to.on('drain', go);
      to.on('close', go);
    },
    final(done) {
      if (!to.destroyed && !to.writableEnded) to.end();
      done();
    },
  });
}

export async function sendFilestore(ctx: Ctx, from: RootServer, to: RootServer, name: string, audit: Audit): Promise<string> {
  const src = filestorePath(basePathOf(ctx.config, from), name);
  const dst = filestorePath(basePathOf(ctx.config, to), name);
  const operation = 'move';
  const sender = await openRemoteSession(ctx, from, { ...audit, operation });
  let receiver: RemoteSession | undefined;
  try {
    receiver = await openRemoteSession(ctx, to, { ...audit, operation });
    const have = await receiver.run(listFilesScript(dst), { timeoutMs: COPY_TIMEOUT_MS, maxOutputBytes: 512 * 1024 * 1024 });
    if (have.exitCode !== 0)
      throw new UserError(receiver.mask(`Listing ${dst} on root server ${to.id} failed: ${have.stderr.slice(-1000)}`));
    const pipe = new PassThrough();
    const opts = { timeoutMs: COPY_TIMEOUT_MS };
    const receiving = receiver.run(receiveScript(dst), { ...opts, stdin: pipe });
    const sending = sender.run(sendMissingScript(src), {
      ...opts,
      stdin: have.stdout,
      stdoutTo: forwardWhileOpen(pipe),
      label: `${sendMissingScript(src)} | (root server ${to.id}) ${receiveScript(dst)}`,
    });
    // A receiver that gives up leaves the sender writing into nothing: end it too.
    receiving.then(
      (r) => (r.exitCode === 0 ? undefined : sender.close()),
      () => sender.close(),
    );
    const [sent, received] = await Promise.all([sending, receiving]);
    if (sent.exitCode !== 0 || received.exitCode !== 0) {
      throw new UserError(
        sender.mask(
          `Sending the filestore ${src} (root server ${from.id}) to ${dst} (root server ${to.id}) failed: ${sent.stderr.trim().slice(-800)} ${received.stdout.trim()} ${received.stderr.trim().slice(-800)}`,
        ),
      );
    }
    return `${sent.stderr.trim()}; ${received.stdout.trim()}`;
  } finally {
    sender.close();
    receiver?.close();
  }
}
