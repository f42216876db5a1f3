// npm run cli -- <command>. The token of create-admin / create-token is the last line of output,
// so scripts can take it with `| tail -n 1`.
import { parseArgs } from 'node:util';
import pino from 'pino';
import { ConfigError, loadConfig } from './core/config.js';
import { applyMigrations, writeMigration } from './core/migrate.js';
import { checkPostgres, UnreachableError } from './core/reachability.js';
import { createDb } from './core/db.js';
import { createAuthService } from './auth/auth-service.js';

const USAGE = `Usage: npm run cli -- <command>
  create-admin --email E [--name N]   create (or promote) an administrator and print a new API token
  create-token --email E              print a new API token for an existing user
  migrate                             apply pending migrations (same as npm run db:migrate)
  diff <name>                         write prisma/migrations/<stamp>_<name> from schema changes`;

async function run(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { email: { type: 'string' }, name: { type: 'string' } },
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
        const { user, token } =
          command === 'create-admin' ? await auth.createAdmin(values.email, values.name) : await auth.createTokenForEmail(values.email);
        console.log(`User ${user.email} (${user.group}), id ${user.id}. API token (shown once):`);
        console.log(token);
      } finally {
        await db.$disconnect();
      }
      return;
    }
    default:
      throw new UsageError(command ? `Unknown command ${command}` : 'No command given');
  }
}

class UsageError extends Error {}

run(process.argv.slice(2)).then(
  () => process.exit(0),
  (err) => {
    if (err instanceof UsageError) console.error(`${err.message}\n\n${USAGE}`);
    else if (err instanceof ConfigError || err instanceof UnreachableError) console.error(err.message);
    else pino().error({ err }, 'command failed');
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
