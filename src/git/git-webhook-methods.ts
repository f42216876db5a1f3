// The git repository method an inbound webhook may call: the push handler of
// the webhook that link_git_webhook registers at the git host.
import type { AppContext } from '../context.js';
import type { WebhookMethodTable } from '../core/webhook-methods.js';
import { createGitRepositoryService, PUSH_METHOD } from './git-repository-service.js';

export function gitWebhookMethods(ctx: AppContext): WebhookMethodTable {
  const service = createGitRepositoryService(ctx);
  return {
    'svc.saas.git.repository': {
      [PUSH_METHOD]: (recId, call) => service.receivePush(recId, call),
    },
  };
}
