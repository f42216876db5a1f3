-- CreateEnum
CREATE TYPE "OdooState" AS ENUM ('not_installed', 'installing', 'running', 'stopped', 'failed');

-- AlterTable
ALTER TABLE "root_servers" ADD COLUMN     "odoo_admin_passwd" TEXT,
ADD COLUMN     "odoo_db_password" TEXT,
ADD COLUMN     "odoo_db_user" TEXT,
ADD COLUMN     "odoo_error" TEXT,
ADD COLUMN     "odoo_http_port" INTEGER,
ADD COLUMN     "odoo_postgresql_server_id" INTEGER,
ADD COLUMN     "odoo_state" "OdooState" NOT NULL DEFAULT 'not_installed',
ADD COLUMN     "odoo_version_id" INTEGER;

-- CreateTable
CREATE TABLE "odoo_versions" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "source_url" TEXT NOT NULL,
    "source_sha256" TEXT NOT NULL,
    "os_packages" TEXT[],
    "server_wide_modules" TEXT[],
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "odoo_versions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "odoo_versions_name_key" ON "odoo_versions"("name");

-- AddForeignKey
ALTER TABLE "root_servers" ADD CONSTRAINT "root_servers_odoo_version_id_fkey" FOREIGN KEY ("odoo_version_id") REFERENCES "odoo_versions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "root_servers" ADD CONSTRAINT "root_servers_odoo_postgresql_server_id_fkey" FOREIGN KEY ("odoo_postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
