-- AlterTable
ALTER TABLE "database_templates" ADD COLUMN     "admin_password" TEXT,
ADD COLUMN     "template_oid" BIGINT,
ADD COLUMN     "template_system_identifier" TEXT;
