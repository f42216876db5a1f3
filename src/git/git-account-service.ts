// Git accounts (spec §2.9; administrators): the git host's personal access token, encrypted and
// write-only, the provider (its single value) and the owning user (the creator unless given).
import type { AppContext } from '../context.js';
import { ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Author } from '../chatter/chatter-service.js';

export const GIT_ACCOUNT_MODEL = 'svc.saas.git.account';

export function createGitAccountService(ctx: AppContext) {
  const { db } = ctx;
  const records = createRecordService(db, ctx.box, { modelName: GIT_ACCOUNT_MODEL, secrets: ['access_token'], tracked: ['name', 'git_provider', 'user_id'] });

  async function checkUser(userId: unknown) {
    if (typeof userId === 'number' && !(await db.user.count({ where: { id: userId } }))) {
      throw new ValidationError(`User ${userId} does not exist`, { field: 'user_id' });
    }
  }

  return {
    ...records,
    async create(data: Record<string, unknown>, author: Author | null) {
      const row = { ...data, user_id: data.user_id ?? author?.id };
      if (row.user_id === undefined) throw new ValidationError('user_id is required', { field: 'user_id' });
      await checkUser(row.user_id);
      return records.create(row, author);
    },
    async update(id: number, data: Record<string, unknown>, author: Author | null) {
      await checkUser(data.user_id);
      return records.update(id, data, author);
    },
    async remove(id: number) {
      await records.getRow(id);
      const used = await db.gitRepository.count({ where: { git_account_id: id } });
      if (used > 0) throw new ValidationError(`This git account is used by ${used} repositories: change or delete them first`);
      await records.remove(id);
    },
  };
}
