-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "database_role" TEXT,
ADD COLUMN     "database_role_password" TEXT;
