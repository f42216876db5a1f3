-- CreateEnum
CREATE TYPE "MoveState" AS ENUM ('moving', 'done', 'failed');

-- AlterEnum
ALTER TYPE "SubscriptionOperation" ADD VALUE 'move';

-- AlterTable
ALTER TABLE "root_servers" ADD COLUMN     "odoo_base_path" TEXT;

-- AlterTable
ALTER TABLE "staging_instances" ADD COLUMN     "postgresql_server_id" INTEGER,
ADD COLUMN     "root_server_id" INTEGER;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "postgresql_server_id" INTEGER,
ADD COLUMN     "root_server_id" INTEGER;

-- CreateTable
CREATE TABLE "subscription_moves" (
    "id" SERIAL NOT NULL,
    "subscription_id" INTEGER NOT NULL,
    "state" "MoveState" NOT NULL DEFAULT 'moving',
    "step" TEXT NOT NULL DEFAULT 'queued',
    "is_back" BOOLEAN NOT NULL DEFAULT false,
    "database_name" TEXT NOT NULL,
    "from_postgresql_server_id" INTEGER NOT NULL,
    "from_root_server_id" INTEGER NOT NULL,
    "to_postgresql_server_id" INTEGER NOT NULL,
    "to_root_server_id" INTEGER NOT NULL,
    "from_system_identifier" TEXT,
    "from_database_oid" BIGINT,
    "freeze_seconds" DOUBLE PRECISION,
    "seconds" DOUBLE PRECISION,
    "error" TEXT,
    "job_id" TEXT,
    "switched_at" TIMESTAMP(3),
    "keep_until" TIMESTAMP(3),
    "old_dropped_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "subscription_moves_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "subscription_moves_subscription_id_idx" ON "subscription_moves"("subscription_id");

-- CreateIndex
CREATE INDEX "subscription_moves_keep_until_idx" ON "subscription_moves"("keep_until");

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_postgresql_server_id_fkey" FOREIGN KEY ("postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscription_moves" ADD CONSTRAINT "subscription_moves_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscription_moves" ADD CONSTRAINT "subscription_moves_from_postgresql_server_id_fkey" FOREIGN KEY ("from_postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscription_moves" ADD CONSTRAINT "subscription_moves_from_root_server_id_fkey" FOREIGN KEY ("from_root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscription_moves" ADD CONSTRAINT "subscription_moves_to_postgresql_server_id_fkey" FOREIGN KEY ("to_postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscription_moves" ADD CONSTRAINT "subscription_moves_to_root_server_id_fkey" FOREIGN KEY ("to_root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- A deployed subscription lives where its template's servers are (until a move takes it elsewhere)
UPDATE "subscriptions" s SET "postgresql_server_id" = t."postgresql_server_id", "root_server_id" = t."root_server_id"
  FROM "database_templates" t
 WHERE s."database_template_id" = t."id" AND s."database_created_at" IS NOT NULL;
UPDATE "staging_instances" si SET "postgresql_server_id" = s."postgresql_server_id", "root_server_id" = s."root_server_id"
  FROM "subscriptions" s
 WHERE si."subscription_id" = s."id";
