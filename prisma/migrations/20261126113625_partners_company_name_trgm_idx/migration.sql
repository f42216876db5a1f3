-- Built CONCURRENTLY, so writers go on while it builds on a big table. It is the only statement
-- of its migration: a script of several statements runs as one transaction, which CONCURRENTLY refuses.
CREATE INDEX CONCURRENTLY "partners_company_name_trgm_idx" ON "partners" USING GIN ("company_name" gin_trgm_ops);
