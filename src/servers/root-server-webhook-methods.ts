// Root server methods that an inbound webhook may name as trigger_action (a registry in code, the
// only methods a webhook can call). Only actions that are safe for anyone holding the webhook URL:
// they queue work the operator already configured and are harmless when repeated. Not offered:
// confirm, reset_draft and cancel (they change the server's life cycle), install/remove_code_server
// (long, destructive or download from the internet), open_code_server (answers a URL nobody would
// read). action_start_monitor and action_stop_monitor are the monitoring feature's.
import type { AppContext } from '../context.js';
import type { WebhookMethodTable } from '../core/webhook-methods.js';
import { createRootServerCommands } from './root-server-commands.js';

export function rootServerWebhookMethods(ctx: AppContext): WebhookMethodTable {
  const service = createRootServerCommands(ctx);
  return {
    'svc.root.server': {
      /** Runs the stored `cmd` (e.g. a restart script) as a job, queued once the call commits. */
      action_run_cmd: async (recId, { tx, afterCommit }) => {
        afterCommit(await service.prepareRunCmd(recId, undefined, null, tx));
      },
      /** Creates the directory layout (idempotent: mkdir -p). */
      action_setup_dir_structure: async (recId, { tx, afterCommit }) => {
        afterCommit(await service.prepareJob('setup_dir_structure', recId, null, tx));
      },
    },
  };
}
