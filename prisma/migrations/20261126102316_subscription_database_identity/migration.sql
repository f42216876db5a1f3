-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "database_oid" BIGINT,
ADD COLUMN     "database_system_identifier" TEXT;
