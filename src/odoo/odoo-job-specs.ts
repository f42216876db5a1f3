// Odoo's jobs on the hosts: each changes a remote system, so none is run again after a crash. Their
// own queue: an OS package installation does not hold up the other SSH jobs.
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';
import { basePath, dbfilter, httpPort, moduleName } from './odoo-names.js';

const onServer = z.object({ root_server_id: refId, ...requestedBy });
/** One such job per server at a time. */
const perServer = (p: { root_server_id: number }) => String(p.root_server_id);
const onTemplate = z.object({ database_template_id: refId, ...requestedBy });
const perTemplate = (p: { database_template_id: number }) => String(p.database_template_id);

export const odooJobs = defineJobs({
  odoo_setup: job({
    queue: 'odoo',
    payload: onServer.extend({
      odoo_version_id: refId,
      postgresql_server_id: refId,
      http_port: httpPort.optional(),
      base_path: basePath.optional(),
      workers: z.number().int().min(0).max(256).optional(),
      max_cron_threads: z.number().int().min(0).max(16),
      dbfilter,
    }),
    key: perServer,
    afterCrash: 'interrupt',
  }),
  odoo_restart: job({ queue: 'odoo', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
  odoo_stop: job({ queue: 'odoo', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
  // Starts the host's Odoo again when it should run and does not: the host came back online after it
  // was offline (a reboot without systemd), or odoo_status found it stopped (odoo-recovery.ts).
  odoo_start_again: job({
    queue: 'odoo',
    payload: onServer.extend({ reason: z.enum(['back_online', 'status']) }),
    key: perServer,
    afterCrash: 'interrupt',
  }),
  odoo_build_template: job({
    queue: 'odoo',
    payload: onTemplate.extend({ modules: z.array(moduleName).max(200).optional() }),
    key: perTemplate,
    afterCrash: 'interrupt',
  }),
  odoo_update_template: job({
    queue: 'odoo',
    payload: onTemplate.extend({ modules: z.array(moduleName).max(200).optional() }),
    key: perTemplate,
    afterCrash: 'interrupt',
  }),
  // Every 10 minutes: a setup_odoo whose job Redis lost left its server installing; it is failed (odoo-lost-setups.ts).
  odoo_lost_setups: job({ queue: 'maintenance', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
});
