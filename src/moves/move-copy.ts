// The copying parts of a move: the database on the target server (made empty, owned by the target
// host's role, then filled by pg_dump | pg_restore as that role) and the filestore streamed from one
// host to the other through the service.
import { PassThrough } from 'node:stream';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import {
  assertTenantRole,
  createEmptyDatabase,
  databaseLocale,
  dumpAndRestore,
  filestorePath,
  onServer,
  type PgConnection,
} from '../instances/index.js';
import { basePathOf, openRemoteSession, type RemoteSession } from '../servers/index.js';
import { listFilesScript, listForMirrorScript, receiveScript, removeMissingScript, sendMissingScript } from './move-programs.js';

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

type Stream = { sendScript: string; sendStdin?: string; receiveScript: string; what: string };

/**
 * One command on the sending host piped into one on the receiving host, through the service at the
 * receiver's pace (never more than a pipe's worth held here). Answers what each side said; fails
 * with what each side that failed said.
 */
async function streamBetween(sender: RemoteSession, receiver: RemoteSession, hosts: { from: RootServer; to: RootServer }, s: Stream) {
  const pipe = new PassThrough();
  const opts = { timeoutMs: COPY_TIMEOUT_MS };
  const what = `${s.what} (root server ${hosts.from.id} to root server ${hosts.to.id}) failed`;
  const receiving = receiver.check(s.receiveScript, `${what} on the receiving side`, { ...opts, stdin: pipe });
  const sending = sender.check(s.sendScript, `${what} on the sending side`, {
    ...opts,
    ...(s.sendStdin === undefined ? {} : { stdin: s.sendStdin }),
    stdoutTo: pipe,
    label: `${s.sendScript} | (root server ${hosts.to.id}) ${s.receiveScript}`,
  });
  // A receiver that gives up leaves the sender writing into nothing: end it too. (One that is done
  // leaves the archive's padding unread: the SSH client drops it once the receiver's input closed.)
  receiving.catch(() => sender.close());
  const [sent, received] = await Promise.allSettled([sending, receiving]);
  if (sent.status === 'rejected' || received.status === 'rejected') {
    const failed = [sent, received].flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : []));
    throw new UserError(failed.join(' '));
  }
  return `${sent.value.stderr.trim()}; ${received.value.stdout.trim()}`;
}

/**
 * One pass of the filestore from one host to the other: the files the target lacks, as a tar
 * stream through the service. `mirror` (the last pass, in the freeze): then the files the target
 * has and the source no longer has (Odoo removed them since the first pass) are removed there, so
 * the new filestore is the old one's copy. Answers what each side said.
 */
export async function sendFilestore(
  ctx: Ctx,
  from: RootServer,
  to: RootServer,
  name: string,
  audit: Audit,
  opts: { mirror?: boolean; toName?: string; operation?: string } = {},
): Promise<string> {
  const src = filestorePath(basePathOf(ctx.config, from), name);
  // A template's copy on another host has a name of its own there (src/pools).
  const dst = filestorePath(basePathOf(ctx.config, to), opts.toName ?? name);
  const operation = opts.operation ?? 'move';
  const hosts = { from, to };
  const sender = await openRemoteSession(ctx, from, { ...audit, operation });
  let receiver: RemoteSession | undefined;
  try {
    receiver = await openRemoteSession(ctx, to, { ...audit, operation });
    const have = await receiver.check(listFilesScript(dst), `Listing ${dst} on root server ${to.id} failed`, {
      timeoutMs: COPY_TIMEOUT_MS,
      maxOutputBytes: 512 * 1024 * 1024,
    });
    const said = [
      await streamBetween(sender, receiver, hosts, {
        sendScript: sendMissingScript(src),
        sendStdin: have.stdout,
        receiveScript: receiveScript(dst),
        what: `Sending the filestore ${src} to ${dst}`,
      }),
    ];
    if (opts.mirror) {
      said.push(
        await streamBetween(sender, receiver, hosts, {
          sendScript: listForMirrorScript(src),
          receiveScript: removeMissingScript(dst),
          what: `Removing from ${dst} the files ${src} no longer has`,
        }),
      );
    }
    return said.join('; ');
  } finally {
    sender.close();
    receiver?.close();
  }
}
