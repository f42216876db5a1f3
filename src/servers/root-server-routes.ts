// /api/v1/root-servers (DESIGN §4): the resource (read: user; write and actions: operator) and the
// operations of spec §4.4. confirm, reset_draft, cancel, start/stop_monitor and open_code_server
// answer when done; run_cmd, setup_dir_structure and the code editor jobs answer 202 {job_id}.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authorOf, registerCrud } from '../core/http/crud.js';
import { idParams, jobAccepted } from '../core/http/schemas.js';
import { createRootServerService, type RootServerJobAction } from './root-server-service.js';
import { rootServerCreate, rootServerFilters, rootServerOut, rootServerUpdate, runCmdBody } from './root-server-schemas.js';

const tags = ['root servers'];

export function registerRootServerRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createRootServerService(ctx);

  registerCrud(parent, {
    path: '/root-servers',
    tag: tags[0]!,
    service,
    output: rootServerOut,
    create: rootServerCreate,
    update: rootServerUpdate,
    filters: rootServerFilters,
    read: 'user',
    write: 'operator',
  });

  const actionPath = (name: string) => `/api/v1/root-servers/:id/actions/${name}`;

  const done = {
    confirm: {
      run: service.confirm,
      description: 'Tests the SSH connection (and sudo) with the stored credentials; draft → confirmed. 400 user_error carries the SSH error.',
    },
    reset_draft: { run: service.resetDraft, description: 'confirmed or cancel → draft; monitoring stops.' },
    cancel: { run: service.cancel, description: 'Disables the server: monitoring stops and every SSH action is refused.' },
    start_monitor: { run: service.startMonitor, description: 'Polls CPU, RAM, disk and network every monitor_update_interval.' },
    stop_monitor: { run: service.stopMonitor, description: 'Stops polling; server_state → no_monitor.' },
  } as const;
  for (const [name, action] of Object.entries(done)) {
    app.post(actionPath(name), {
      config: { group: 'operator' },
      schema: { tags, description: action.description, params: idParams, response: { 200: rootServerOut } },
      handler: (req) => action.run(req.params.id, authorOf(req.user)),
    });
  }

  app.post(actionPath('run_cmd'), {
    config: { group: 'operator' },
    schema: {
      tags,
      description: 'Stores cmd when given, then runs the command over SSH in a job; the output goes to cmd_output and the action log.',
      params: idParams,
      body: runCmdBody,
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) => {
      const jobId = await service.runCmd(req.params.id, req.body?.cmd, authorOf(req.user));
      return reply.status(202).send({ job_id: jobId });
    },
  });

  const jobs: Record<RootServerJobAction, string> = {
    setup_dir_structure: 'Creates the Odoo directory layout (addons, custom-addons, config, data, logs, backups) under ODOO_BASE_PATH.',
    install_code_server: 'Installs the web code editor (CODE_SERVER_INSTALL_CMD) and runs it as a service with code_server_password.',
    remove_code_server: 'Stops and uninstalls the web code editor.',
  };
  for (const [name, description] of Object.entries(jobs) as [RootServerJobAction, string][]) {
    app.post(actionPath(name), {
      config: { group: 'operator' },
      schema: { tags, description, params: idParams, response: { 202: jobAccepted } },
      handler: async (req, reply) => {
        const jobId = await service.enqueue(name, req.params.id, authorOf(req.user));
        return reply.status(202).send({ job_id: jobId });
      },
    });
  }

  app.post(actionPath('open_code_server'), {
    config: { group: 'operator' },
    schema: {
      tags,
      description: 'The URL of the web code editor.',
      params: idParams,
      response: { 200: z.object({ url: z.string(), code_server_state: z.enum(['installed', 'running']) }) },
    },
    handler: (req) => service.openCodeServer(req.params.id),
  });
}
