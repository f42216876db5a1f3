-- CreateEnum
CREATE TYPE "StagingState" AS ENUM ('creating', 'ready', 'failed');

-- CreateTable
CREATE TABLE "staging_instances" (
    "id" SERIAL NOT NULL,
    "subscription_id" INTEGER NOT NULL,
    "database_name" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "state" "StagingState" NOT NULL DEFAULT 'creating',
    "error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "staging_instances_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "staging_instances_database_name_key" ON "staging_instances"("database_name");

-- CreateIndex
CREATE INDEX "staging_instances_subscription_id_idx" ON "staging_instances"("subscription_id");

-- CreateIndex
CREATE INDEX "staging_instances_expires_at_idx" ON "staging_instances"("expires_at");

-- AddForeignKey
ALTER TABLE "staging_instances" ADD CONSTRAINT "staging_instances_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
