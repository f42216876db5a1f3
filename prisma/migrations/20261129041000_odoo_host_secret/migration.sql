-- AlterTable
ALTER TABLE "root_servers" ADD COLUMN     "odoo_host_secret" TEXT;
