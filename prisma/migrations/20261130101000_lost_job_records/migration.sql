-- The job of an operation whose in-progress state would otherwise outlive a job Redis lost: a
-- setup_odoo (odoo_state installing) and a staging copy being made (state creating).
ALTER TABLE "root_servers" ADD COLUMN "odoo_job_id" TEXT;
ALTER TABLE "staging_instances" ADD COLUMN "job_id" TEXT;
