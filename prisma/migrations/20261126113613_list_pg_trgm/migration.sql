-- Trigram indexes for ?q= (substring search served by an index).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
