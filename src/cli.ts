// npm run cli -- <command>. The token of create-admin / create-token is the last line of output,
// so scripts can take it with `| tail -n 1`; the line before it says which user it belongs to.
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, loadConfig } from './core/config.js';
import { applyMigrations, writeMigration } from './core/migrate.js';
import { checkPostgres, UnreachableError } from './core/reachability.js';
import { createDb } from './core/db.js';
import { NotFoundError } from './core/errors.js';
import { createAuthService } from './auth/auth-service.js';
import { QuickstartError } from './quickstart/quickstart-errors.js';

const USAGE = `Usage: npm run cli -- <command>
  create-admin --email E [--name N]   create (or promote) an administrator and print a new API token;
                                      run again, it prints another token for the same user
  create-token --email E              print a new API token for an existing user
  migrate                             apply pending migrations (same as npm run db:migrate)
  diff <name>                         write prisma/migrations/<stamp>_<name> from schema changes
  quickstart --odoo-source <tarball path or https URL> --sha256 <hex> [--trust-this-machine]
             [--domain <name>] [--email <admin e-mail>]
             [--ssh-host 127.0.0.1] [--ssh-port 22] [--ssh-user root] [--authorized-keys <file>]
                                      make this machine svc's first Odoo host and a trial form that
                                      deploys at once (README, Quick start); run again, it changes
                                      only what is not right
  wait <job_id>                       follow a job, printing its progress; exits 1 if it failed`;

async function run(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      'odoo-source': { type: 'string' },
      sha256: { type: 'string' },
      domain: { type: 'string' },
      'trust-this-machine': { type: 'boolean' },
      'ssh-host': { type: 'string' },
      'ssh-port': { type: 'string' },
      'ssh-user': { type: 'string' },
      'authorized-keys': { type: 'string' },
    },
  });
  const [command, arg] = positionals;
  const config = loadConfig();

  switch (command) {
    case 'migrate': {
      await checkPostgres(config.DATABASE_URL);
      const applied = await applyMigrations(config.DATABASE_URL);
      console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'No pending migrations');
      return;
    }
    case 'diff': {
      if (!arg) throw new UsageError('diff needs a migration name');
      const dir = await writeMigration(config.DATABASE_URL, arg);
      console.log(dir ? `Wrote ${dir}/migration.sql` : 'Schema and migrations are in sync: nothing written');
      return;
    }
    case 'create-admin':
    case 'create-token': {
      if (!values.email) throw new UsageError(`${command} needs --email`);
      await checkPostgres(config.DATABASE_URL);
      await applyMigrations(config.DATABASE_URL);
      const db = createDb(config.DATABASE_URL, 1);
      try {
        const auth = createAuthService({ db });
        if (command === 'create-admin') {
          const { user, before, token } = await auth.createAdmin(values.email, values.name);
          console.log(`${adminSentence(user, before)} A new API token (shown once):`);
          console.log(token);
        } else {
          const { user, token } = await auth.createTokenForEmail(values.email).catch((err: unknown) => {
            throw err instanceof NotFoundError ? new CliError(noSuchUser(values.email!)) : err;
          });
          console.log(
            `A new API token for ${user.email} (${user.group}, user id ${user.id}), shown once; the user's other tokens stay valid:`,
          );
          console.log(token);
        }
      } finally {
        await db.$disconnect();
      }
      return;
    }
    case 'quickstart': {
      // Imported here: the app, the workers and every feature load only for the commands that use them.
      const { quickstartOptions } = await import('./quickstart/quickstart-options.js');
      const { runQuickstart } = await import('./quickstart/quickstart.js');
      const options = quickstartOptions(values);
      const done = await runQuickstart(config, options, (line) => console.log(line));
      console.log(`\nThe trial form: ${done.trialUrl}  (served while svc runs: npm start)`);
      console.log(`An API token of the operator ${done.operatorEmail} (shown once):`);
      console.log(done.operatorToken);
      return;
    }
    case 'wait': {
      if (!arg) throw new UsageError('wait needs a job id (the job_id of a 202 answer)');
      const { waitForJob } = await import('./quickstart/job-wait.js');
      await waitForJob(config, arg, (line) => console.log(line));
      return;
    }
    default:
      throw new UsageError(command ? `Unknown command ${command}` : 'No command given');
  }
}

/** What create-admin did, in one sentence: it may run again for the same address (the README does). */
function adminSentence(user: { id: number; email: string }, before: { group: string; active: boolean } | null): string {
  if (!before) return `Created the administrator ${user.email} (user id ${user.id}).`;
  const kept = 'its other tokens stay valid.';
  if (before.group === 'administrator' && before.active) return `${user.email} was already an administrator (user id ${user.id}); ${kept}`;
  const was = before.active ? `a ${before.group}` : `an inactive ${before.group}`;
  return `${user.email} (user id ${user.id}) was ${was} and is now an active administrator; ${kept}`;
}

function noSuchUser(email: string): string {
  return (
    `No user has the e-mail ${email}. Make an administrator with: npm run cli -- create-admin --email ${email} ` +
    '(or a user of another group with POST /api/v1/users)'
  );
}

class UsageError extends Error {}
/** A failure the user can act on: its message is the whole output. */
class CliError extends Error {}

run(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => {
    if (err instanceof UsageError) console.error(`${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError || err instanceof UnreachableError || err instanceof CliError || err instanceof QuickstartError)
      console.error(err.message);
    else pino().error({ err }, 'command failed');
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
