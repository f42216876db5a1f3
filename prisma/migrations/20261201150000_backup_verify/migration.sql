-- Verified backups (issue 47, point 5): svc's backup server restores a chosen tenant's latest backup
-- into a scratch database each week, has the host's Odoo serve it and signs in to it, and runs
-- restic's check on each repository. The last verify's outcome is on the backup server record:
-- verified_at (when it ended), verify_state ('ok' or 'failed'; null: never verified), verify_note
-- (what was checked: the tenant and backup, each repository's check, the sign-in; or the cause).
ALTER TABLE "backup_servers"
    ADD COLUMN "verified_at" TIMESTAMP(3),
    ADD COLUMN "verify_state" TEXT,
    ADD COLUMN "verify_note" TEXT;
