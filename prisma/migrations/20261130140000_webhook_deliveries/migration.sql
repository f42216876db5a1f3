-- A webhook call that runs a trigger_action leaves a row in the same transaction as the method's
-- effect: the caller's delivery id (Idempotency-Key or X-GitHub-Delivery), or one of svc's own. A
-- COMMIT whose answer was lost is settled by looking for the row; a retry of a delivery already
-- stored finds it and runs nothing. Kept as long as the call log (settings.webhook_call_log_days).
CREATE TABLE "webhook_deliveries" (
    "id" BIGSERIAL NOT NULL,
    "webhook_id" INTEGER NOT NULL,
    "delivery" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "webhook_deliveries_webhook_id_delivery_key" ON "webhook_deliveries"("webhook_id", "delivery");
CREATE INDEX "webhook_deliveries_created_at_idx" ON "webhook_deliveries"("created_at");

ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;
