-- Built CONCURRENTLY, so writers go on while it builds on a big table. It is the only statement
-- of its migration: a script of several statements runs as one transaction, which CONCURRENTLY refuses.
CREATE INDEX CONCURRENTLY "subscriptions_trial_end_date_id_idx" ON "subscriptions"("trial_end_date", "id");
