-- Built CONCURRENTLY, so writers go on while it builds on a big table. It is the only statement
-- of its migration: a script of several statements runs as one transaction, which CONCURRENTLY refuses.
CREATE INDEX CONCURRENTLY "webhook_calls_webhook_id_status_called_at_idx" ON "webhook_calls"("webhook_id", "status", "called_at");
