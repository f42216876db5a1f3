-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "database_created_at" TIMESTAMP(3);

-- Subscriptions deployed before this column existed: a database that was deployed and not dropped.
-- (A cancelled one cannot tell whether it ever ran; it is counted as deployed so that it can still
-- be backed up and dropped.)
UPDATE "subscriptions" SET "database_created_at" = "updated_at"
WHERE "database_name" IS NOT NULL AND "database_dropped_at" IS NULL AND "state" IN ('running', 'suspended', 'cancelled');
