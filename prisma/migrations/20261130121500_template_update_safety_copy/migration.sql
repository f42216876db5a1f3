-- A template's update is undone when it fails (docs/odoo-hosts.md): the safety copy it makes first
-- (database and filestore directory name) and the copy's oid, kept while the update runs, so an
-- update cut short by a crash is put back by the next one.
ALTER TABLE "database_templates" ADD COLUMN "update_safety_copy" TEXT;
ALTER TABLE "database_templates" ADD COLUMN "update_safety_copy_oid" BIGINT;
