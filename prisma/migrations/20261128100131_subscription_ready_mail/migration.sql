-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "ready_sent_at" TIMESTAMP(3);

-- Instances that exist already keep the credentials their customers have: the ready mail would set
-- a new password in each of them unasked.
UPDATE "subscriptions" SET "ready_sent_at" = COALESCE("trial_ready_sent_at", "database_created_at") WHERE "database_created_at" IS NOT NULL;
