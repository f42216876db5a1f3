// Where Odoo lives on a root server: a column of the server's row with the config's default. Here,
// beside the server itself, because every feature that works on an Odoo host needs it and the odoo
// feature cannot hold it: odoo imports instances, which needs it for filestore and credentials paths.
import type { RootServer } from '../generated/prisma/client.js';

/** Where Odoo lives on a host: the base path its first setup_odoo chose, else ODOO_BASE_PATH. */
export const basePathOf = (config: { ODOO_BASE_PATH: string }, server: Pick<RootServer, 'odoo_base_path'>) =>
  server.odoo_base_path ?? config.ODOO_BASE_PATH;
