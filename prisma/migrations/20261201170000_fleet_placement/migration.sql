-- A fleet of Odoo hosts (issue 49): placement of new tenants on the hosts of a pool.
-- A host an operator cordoned gets no new tenant; its capacity may be set by the operator (null:
-- derived from its memory and disk); memory_bytes is what setup_odoo read on the host.
ALTER TABLE "root_servers"
    ADD COLUMN "cordoned_at" TIMESTAMP(3),
    ADD COLUMN "cordon_reason" TEXT,
    ADD COLUMN "capacity_tenants" INTEGER,
    ADD COLUMN "capacity_memory_bytes" BIGINT,
    ADD COLUMN "capacity_disk_bytes" BIGINT,
    ADD COLUMN "memory_bytes" BIGINT;

-- When a deployment chose where the subscription lives (its servers are recorded then, before the
-- database exists, so the host's room counts it at once).
ALTER TABLE "subscriptions" ADD COLUMN "placed_at" TIMESTAMP(3);
CREATE INDEX "subscriptions_root_server_id_idx" ON "subscriptions"("root_server_id");
CREATE INDEX "standby_databases_root_server_id_idx" ON "standby_databases"("root_server_id");

-- The pool's room alert (a pool: the Odoo hosts of one version), firing since (null: not firing).
ALTER TABLE "odoo_versions" ADD COLUMN "room_low_since" TIMESTAMP(3);

-- The free room (in tenants) under which a pool is an alert; null: room for 24 hours of the last
-- week's trials.
ALTER TABLE "settings" ADD COLUMN "pool_room_alert_tenants" INTEGER;
