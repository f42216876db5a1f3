// Git accounts (administrators): the git host's personal access token, encrypted and
// write-only, the provider (its single value) and the owning user (the creator unless given).
import type { AppContext } from '../context.js';
import { ConflictError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { Author } from '../core/chatter.js';
import { gitAccountModel } from './git-models.js';

export function createGitAccountService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  const { db } = ctx;
  const records = createRecordService(ctx, gitAccountModel);

  async function checkUser(userId: unknown) {
    if (typeof userId === 'number' && !(await db.user.count({ where: { id: userId } }))) {
      throw new ValidationError(`User ${userId} does not exist`, 'user_id');
    }
  }

  return {
    ...records,
    async create(data: Record<string, unknown>, author: Author | null) {
      const row = { ...data, user_id: data.user_id ?? author?.id };
      if (row.user_id === undefined) throw new ValidationError('user_id is required', 'user_id');
      await checkUser(row.user_id);
      return records.create(row, author);
    },
    async update(id: number, data: Record<string, unknown>, author: Author | null, precondition?: Precondition) {
      await checkUser(data.user_id);
      return records.update(id, data, author, precondition);
    },
    async remove(id: number, precondition?: Precondition) {
      await records.getRow(id);
      const used = await db.gitRepository.count({ where: { git_account_id: id } });
      if (used > 0) {
        const repositories = used === 1 ? '1 repository' : `${used} repositories`;
        throw new ConflictError(`This git account is used by ${repositories}: change or delete them first`);
      }
      await records.remove(id, precondition);
    },
  };
}
