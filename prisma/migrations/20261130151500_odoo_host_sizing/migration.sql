-- The processes each Odoo host's configuration runs, as setup_odoo wrote it: every host of one
-- PostgreSQL server is counted against its max_connections from these (docs/odoo-hosts.md). A host
-- set up before has none and is counted from its next setup_odoo.
ALTER TABLE "root_servers" ADD COLUMN "odoo_workers" INTEGER, ADD COLUMN "odoo_max_cron_threads" INTEGER;
