-- A standby records the template contents it was copied from (the template's content_version, which
-- build, a successful update and an accepted replacement advance), beside the template record's
-- updated_at: a standby of older contents is neither handed out nor kept. The standbys made before
-- this column existed may be of older contents (an update advances content_version without touching
-- updated_at): they are made again once.
ALTER TABLE "standby_databases" ADD COLUMN "template_content_version" INTEGER NOT NULL DEFAULT -1;
ALTER TABLE "standby_databases" ALTER COLUMN "template_content_version" SET DEFAULT 0;
