-- A staging copy may be made from a backup instead of the live instance: the backup's id on the
-- subscription's backup server (null: copied from the live instance).
ALTER TABLE "staging_instances" ADD COLUMN "backup_id" INTEGER;
