-- Built CONCURRENTLY, so writers go on while it builds on a big table. It is the only statement
-- of its migration: a script of several statements runs as one transaction, which CONCURRENTLY refuses.
CREATE INDEX CONCURRENTLY "messages_model_name_rec_id_created_at_id_idx" ON "messages"("model_name", "rec_id", "created_at", "id");
