// Database templates: the rules of their records. Customer databases are found on their template's
// server, so that cannot change under them; a template never names PostgreSQL's own databases or
// the service's own (the deployment checks the database itself again before copying it).
import type { AppContext } from '../context.js';
import { ConflictError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { ownDatabase, SYSTEM_DATABASES } from '../postgresql/database-identity.js';
import { databaseTemplateModel } from './database-template-models.js';

type Data = Record<string, unknown>;

async function assertTemplateName(own: Promise<{ name: string }>, data: Data) {
  const name = data.template_db_name;
  if (typeof name !== 'string') return;
  if (SYSTEM_DATABASES.includes(name) || name === (await own).name) {
    throw new ValidationError(`${name} is never a template: it is PostgreSQL's own or the service's own database`, [
      { field: 'template_db_name', message: "PostgreSQL's own or the service's own database" },
    ]);
  }
}

export function createDatabaseTemplateService(ctx: Pick<AppContext, 'db' | 'box'>) {
  const own = () => ownDatabase(ctx.db);
  const records = createRecordService(ctx, databaseTemplateModel, {
    async prepareUpdate(tx, before, data) {
      await assertTemplateName(own(), data);
      if (!('postgresql_server_id' in data) || data.postgresql_server_id === before.postgresql_server_id) return undefined;
      const bound = await tx.subscription.count({ where: { database_template_id: before.id, database_created_at: { not: null } } });
      if (bound > 0) {
        throw new ConflictError(
          `${bound} subscription database(s) made from this template live on its PostgreSQL server: postgresql_server_id cannot change`,
          { fields: [{ field: 'postgresql_server_id', message: 'subscription databases live on the current server' }] },
        );
      }
      return undefined;
    },
  });

  return {
    ...records,
    async create(data: Data, author: Parameters<typeof records.create>[1] = null) {
      await assertTemplateName(own(), data);
      return records.create(data, author);
    },
    /** The template says where its subscriptions' databases are: it stays while any exists. */
    async remove(id: number) {
      const bound = await ctx.db.subscription.count({
        where: { database_template_id: id, OR: [{ database_created_at: { not: null } }, { state: 'deploying' }] },
      });
      if (bound > 0) {
        throw new ConflictError(`${bound} subscription database(s) made from this template exist: drop them before deleting it`);
      }
      return records.remove(id);
    },
  };
}
