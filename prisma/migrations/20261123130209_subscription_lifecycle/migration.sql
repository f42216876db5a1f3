-- CreateEnum
CREATE TYPE "SuspendReason" AS ENUM ('trial_expired', 'manual');

-- CreateEnum
CREATE TYPE "SubscriptionOperation" AS ENUM ('backup', 'restore', 'drop_database');

-- AlterEnum
ALTER TYPE "SubscriptionState" ADD VALUE 'suspended';

-- AlterTable
ALTER TABLE "settings" ADD COLUMN     "drop_expired_trials" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "trial_reminder_days" INTEGER NOT NULL DEFAULT 3;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "database_dropped_at" TIMESTAMP(3),
ADD COLUMN     "drop_attempted_at" TIMESTAMP(3),
ADD COLUMN     "operation" "SubscriptionOperation",
ADD COLUMN     "operation_job_id" TEXT,
ADD COLUMN     "suspend_reason" "SuspendReason",
ADD COLUMN     "suspended_at" TIMESTAMP(3),
ADD COLUMN     "trial_expired_sent_at" TIMESTAMP(3),
ADD COLUMN     "trial_ready_sent_at" TIMESTAMP(3),
ADD COLUMN     "trial_reminder_sent_at" TIMESTAMP(3);
