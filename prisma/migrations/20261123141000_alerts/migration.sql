-- CreateEnum
CREATE TYPE "AlertMetric" AS ENUM ('cpu_percent', 'ram_percent', 'disk_percent', 'load_1', 'server_offline');

-- CreateEnum
CREATE TYPE "AlertState" AS ENUM ('firing', 'resolved');

-- CreateTable
CREATE TABLE "alert_rules" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "metric" "AlertMetric" NOT NULL,
    "threshold" DOUBLE PRECISION,
    "duration_seconds" INTEGER NOT NULL DEFAULT 0,
    "root_server_ids" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "notification_server_id" INTEGER,
    "topic" TEXT NOT NULL DEFAULT 'svc-alerts',
    "email_to" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "notify_resolved" BOOLEAN NOT NULL DEFAULT true,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "alert_rules_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "alerts" (
    "id" SERIAL NOT NULL,
    "rule_id" INTEGER NOT NULL,
    "root_server_id" INTEGER NOT NULL,
    "state" "AlertState" NOT NULL DEFAULT 'firing',
    "metric" "AlertMetric" NOT NULL,
    "threshold" DOUBLE PRECISION,
    "value" DOUBLE PRECISION NOT NULL,
    "resolved_value" DOUBLE PRECISION,
    "started_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "resolved_at" TIMESTAMP(3),
    "notified_at" TIMESTAMP(3),
    "notify_error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "alerts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "alerts_root_server_id_state_idx" ON "alerts"("root_server_id", "state");

-- CreateIndex
CREATE INDEX "alerts_rule_id_state_idx" ON "alerts"("rule_id", "state");

-- CreateIndex
CREATE UNIQUE INDEX "alerts_one_firing_per_rule_server" ON "alerts"("rule_id", "root_server_id") WHERE (state = 'firing');

-- AddForeignKey
ALTER TABLE "alert_rules" ADD CONSTRAINT "alert_rules_notification_server_id_fkey" FOREIGN KEY ("notification_server_id") REFERENCES "notification_servers"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- Deleting a root server resolves its firing alerts (DESIGN §10), whatever path deletes it.
CREATE FUNCTION "alerts_resolve_on_server_delete"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "alerts" SET "state" = 'resolved', "resolved_at" = CURRENT_TIMESTAMP
  WHERE "root_server_id" = OLD."id" AND "state" = 'firing';
  RETURN OLD;
END;
$$;

CREATE TRIGGER "root_servers_resolve_alerts" AFTER DELETE ON "root_servers"
  FOR EACH ROW EXECUTE FUNCTION "alerts_resolve_on_server_delete"();
