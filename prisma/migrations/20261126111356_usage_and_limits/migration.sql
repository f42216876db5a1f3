-- CreateEnum
CREATE TYPE "UsageState" AS ENUM ('ok', 'warning', 'exceeded');

-- AlterEnum
ALTER TYPE "SuspendReason" ADD VALUE 'over_limit';

-- AlterTable
ALTER TABLE "postgresql_servers" ADD COLUMN     "usage_error" TEXT,
ADD COLUMN     "usage_measured_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "settings" ADD COLUMN     "enforce_limits" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "limit_grace_days" INTEGER NOT NULL DEFAULT 7,
ADD COLUMN     "usage_interval_minutes" INTEGER NOT NULL DEFAULT 15;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "usage" JSONB,
ADD COLUMN     "usage_exceeded_since" TIMESTAMP(3),
ADD COLUMN     "usage_notified_state" "UsageState" NOT NULL DEFAULT 'ok',
ADD COLUMN     "usage_state" "UsageState" NOT NULL DEFAULT 'ok';

-- CreateTable
CREATE TABLE "subscription_usage_days" (
    "subscription_id" INTEGER NOT NULL,
    "date" DATE NOT NULL,
    "db_size_bytes" BIGINT,
    "filestore_bytes" BIGINT,
    "active_users" INTEGER,
    "record_counts" JSONB NOT NULL DEFAULT '{}',

    CONSTRAINT "subscription_usage_days_pkey" PRIMARY KEY ("subscription_id","date")
);

-- CreateIndex
CREATE INDEX "subscriptions_usage_state_idx" ON "subscriptions"("usage_state");

-- AddForeignKey
ALTER TABLE "subscription_usage_days" ADD CONSTRAINT "subscription_usage_days_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
