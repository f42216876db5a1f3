// /api/v1/root-servers: the resource (read: user; write and actions: operator) and its operations.
// confirm, reset_draft, cancel and open_code_server answer when done; run_cmd, setup_dir_structure,
// setup_proxy and the code editor jobs answer 202 {job_id}. start_monitor and stop_monitor are the
// monitoring feature's (src/monitoring/monitor-routes.ts).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Registry } from '../feature.js';
import { action, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { createRootServerService } from './root-server-service.js';
import { rootServerCreate, rootServerFilters, rootServerOut, rootServerUpdate, runCmdBody } from './root-server-schemas.js';
import { rootServerModel } from './root-server-models.js';

export function registerRootServerRoutes(app: FastifyInstance, ctx: AppContext, registry: Registry) {
  const service = createRootServerService(ctx, registry.rootServerObservers);
  const path = '/root-servers';
  const tag = 'root servers';

  registerCrud(app, {
    path,
    model: rootServerModel,
    tag,
    service,
    output: rootServerOut,
    create: rootServerCreate,
    update: rootServerUpdate,
    filters: rootServerFilters,
    read: 'user',
    write: 'operator',
  });

  registerActions(app, {
    path,
    tag,
    group: 'operator',
    actions: {
      confirm: action({
        summary: 'Confirm a root server',
        description:
          'Tests the SSH connection (and sudo) with the stored credentials; draft → confirmed. 400 user_error carries the SSH error.',
        response: rootServerOut,
        run: ({ id, author }) => service.confirm(id, author),
      }),
      reset_draft: action({
        summary: 'Reset a root server to draft',
        description: 'confirmed or cancel → draft; monitoring stops.',
        response: rootServerOut,
        run: ({ id, author }) => service.resetDraft(id, author),
      }),
      cancel: action({
        summary: 'Cancel a root server',
        description: 'Disables the server: monitoring stops and every SSH action is refused.',
        response: rootServerOut,
        run: ({ id, author }) => service.cancel(id, author),
      }),
      run_cmd: action({
        summary: 'Run a command on a root server',
        description: 'Stores cmd when given, then runs the command over SSH in a job; the output goes to cmd_output and the action log.',
        body: runCmdBody,
        response: 'job',
        run: ({ id, body, author }) => service.runCmd(id, body?.cmd, author),
      }),
      setup_dir_structure: action({
        summary: 'Create the Odoo directory layout',
        description: 'Creates the Odoo directory layout (addons, custom-addons, config, data, logs, backups) under ODOO_BASE_PATH.',
        response: 'job',
        run: ({ id, author }) => service.enqueue('setup_dir_structure', id, author),
      }),
      install_code_server: action({
        summary: 'Install the web code editor',
        description: 'Installs the web code editor (CODE_SERVER_INSTALL_CMD) and runs it as a service with code_server_password.',
        response: 'job',
        run: ({ id, author }) => service.enqueue('install_code_server', id, author),
      }),
      remove_code_server: action({
        summary: 'Remove the web code editor',
        description: 'Stops and uninstalls the web code editor.',
        response: 'job',
        run: ({ id, author }) => service.enqueue('remove_code_server', id, author),
      }),
      setup_proxy: action({
        summary: 'Set up the HTTPS proxy of customer domains',
        description:
          'Installs Caddy from the OS packages when missing, writes the main Caddyfile (ACME_CA_URL, ACME_EMAIL, ACME_CA_ROOT_PEM; imports /etc/caddy/svc.d/*.caddy), validates it, then enables and reloads Caddy.',
        response: 'job',
        run: ({ id, author }) => service.enqueue('setup_proxy', id, author),
      }),
      open_code_server: action({
        summary: 'Open the web code editor',
        description: 'The URL of the web code editor.',
        response: z.object({ url: z.string(), code_server_state: z.enum(['installed', 'running']) }),
        run: ({ id }) => service.openCodeServer(id),
      }),
    },
  });
}
