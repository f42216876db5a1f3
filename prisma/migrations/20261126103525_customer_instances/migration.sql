-- CreateEnum
CREATE TYPE "StandbyState" AS ENUM ('creating', 'ready', 'failed', 'taken');

-- AlterTable
ALTER TABLE "database_templates" ADD COLUMN     "root_server_id" INTEGER;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "instance_sync_pending_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "trial_packages" ADD COLUMN     "standby_pool_size" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "standby_databases" (
    "id" SERIAL NOT NULL,
    "trial_package_id" INTEGER,
    "database_template_id" INTEGER,
    "template_version" TIMESTAMP(3) NOT NULL,
    "postgresql_server_id" INTEGER NOT NULL,
    "root_server_id" INTEGER,
    "database_name" TEXT NOT NULL,
    "state" "StandbyState" NOT NULL DEFAULT 'creating',
    "error" TEXT,
    "system_identifier" TEXT,
    "oid" BIGINT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "standby_databases_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "standby_databases_database_name_key" ON "standby_databases"("database_name");

-- CreateIndex
CREATE INDEX "standby_databases_trial_package_id_state_idx" ON "standby_databases"("trial_package_id", "state");

-- AddForeignKey
ALTER TABLE "database_templates" ADD CONSTRAINT "database_templates_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "standby_databases" ADD CONSTRAINT "standby_databases_trial_package_id_fkey" FOREIGN KEY ("trial_package_id") REFERENCES "trial_packages"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "standby_databases" ADD CONSTRAINT "standby_databases_database_template_id_fkey" FOREIGN KEY ("database_template_id") REFERENCES "database_templates"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "standby_databases" ADD CONSTRAINT "standby_databases_postgresql_server_id_fkey" FOREIGN KEY ("postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "standby_databases" ADD CONSTRAINT "standby_databases_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
