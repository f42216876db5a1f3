-- Built CONCURRENTLY, so writers go on while it builds on a big table. It is the only statement
-- of its migration: a script of several statements runs as one transaction, which CONCURRENTLY refuses.
CREATE INDEX CONCURRENTLY "partners_created_at_id_idx" ON "partners"("created_at", "id");
