-- A verify that runs (verify_state 'running') holds a lease it renews, as a backup does: one whose
-- process died is found once the lease has run out, failed as interrupted, and the scratch database
-- it recorded (verify_scratch: {"database", "postgresql_server_id", "root_server_id"}) is removed
-- with its credentials file and filestore on the Odoo host.
ALTER TABLE "backup_servers"
    ADD COLUMN "verify_lease_until" TIMESTAMP(3),
    ADD COLUMN "verify_scratch" JSONB;
