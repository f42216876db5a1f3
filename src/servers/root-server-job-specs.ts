// Root server operations over SSH, on one queue so they never wait behind monitoring
// polls. Every job of the ssh queue changes a remote system: none is run again after a crash.
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

const onServer = z.object({ root_server_id: refId, ...requestedBy });
/** One such job per server at a time. */
const perServer = (p: { root_server_id: number }) => String(p.root_server_id);

export const rootServerJobs = defineJobs({
  // The command travels with the job: two run_cmd calls in a row each run their own command.
  root_server_run_cmd: job({
    queue: 'ssh',
    payload: onServer.extend({ cmd: z.string().min(1) }),
    afterCrash: 'interrupt',
  }),
  root_server_setup_dir_structure: job({ queue: 'ssh', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
  root_server_install_code_server: job({ queue: 'ssh', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
  root_server_remove_code_server: job({ queue: 'ssh', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
  root_server_setup_proxy: job({ queue: 'ssh', payload: onServer, key: perServer, afterCrash: 'interrupt' }),
});
