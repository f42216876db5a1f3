// The last step of a deployment on a host that runs Odoo: the service signs in to the new instance
// as the customer, through the host's own Odoo, and checks the user it gets. JSON-RPC's
// common.authenticate answers for any database its role owns (RPC ignores dbfilter) in every
// version svc runs; the call is made on the host (Odoo listens on 127.0.0.1 only) over the SSH
// connection, with the password on the command's standard input, never on a command line. It also
// loads the instance's registry, so the customer's first page is quick. It carries the host's secret
// (X-Svc-Host-Secret, on standard input too): svc's addon treats any request without it as one
// through the proxy (tenants' databases only).
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { hostProgram, pythonCommand } from '../core/host-program.js';
import type { RootServer } from '../generated/prisma/client.js';
import { openRemoteSession } from '../servers/index.js';

const SIGN_IN_TIMEOUT_MS = 3 * 60_000;

const SIGN_IN = hostProgram(new URL('./host/sign_in.py', import.meta.url));

export interface CustomerSignIn {
  database: string;
  login: string;
  password: string;
  /** The user the customer must be (the template's administrator). */
  uid: number;
}

/** Whether svc set up Odoo on the host: then every deployment there signs in as the customer (a stopped Odoo fails it). */
export const hostsOdoo = (host: RootServer | null): host is RootServer => host !== null && host.odoo_state !== 'not_installed';

/** Signs in as the customer through the host's Odoo; a UserError naming the host when it refuses or does not answer. */
export async function signInAsCustomer(
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  host: RootServer,
  who: CustomerSignIn,
  audit: { user_id: number | null; job_id?: string | null },
): Promise<string> {
  const name = `Odoo on root server ${host.id} (${host.name ?? host.ip}, port ${host.odoo_http_port})`;
  if (host.odoo_state !== 'running' || host.odoo_http_port === null) {
    throw new UserError(`${name} is ${host.odoo_state}: the customer could not sign in to ${who.database}`);
  }
  const secret = await ctx.secretBox.reveal(host.odoo_host_secret);
  const session = await openRemoteSession(ctx, host, { ...audit, secrets: [who.password] }).catch((err: Error) => {
    throw new UserError(`${name} could not be reached: ${err.message}`);
  });
  try {
    const input = JSON.stringify({ port: host.odoo_http_port, db: who.database, login: who.login, password: who.password, secret });
    const res = await session.check(pythonCommand(SIGN_IN), `Signing in through ${name} failed`, {
      stdin: input,
      sudo: false,
      timeoutMs: SIGN_IN_TIMEOUT_MS,
      label: `sign in to ${who.database} as ${who.login} through ${name} (JSON-RPC common.authenticate)`,
    });
    const line = session.mask(res.stdout.trim().split('\n').pop() ?? '');
    if (line.startsWith('down=')) throw new UserError(`${name} did not answer the customer's sign-in to ${who.database}: ${line.slice(5)}`);
    if (line.startsWith('error=')) throw new UserError(`${name} refused the customer's sign-in to ${who.database}: ${line.slice(6)}`);
    const uid = JSON.parse(line.slice(4) || 'null') as unknown;
    if (uid !== who.uid) {
      throw new UserError(
        `${name} refused the customer's sign-in to ${who.database}: ${uid === false ? 'wrong login or password' : `it answered user ${String(uid)}, not ${who.uid}`}`,
      );
    }
    return `signed in to ${who.database} as ${who.login} (user ${who.uid}) through ${name}`;
  } finally {
    session.close();
  }
}
