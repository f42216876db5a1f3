-- AlterTable
ALTER TABLE "database_templates" ADD COLUMN     "owner_password" TEXT,
ADD COLUMN     "owner_role" TEXT;

-- AlterTable
ALTER TABLE "subscriptions" ADD COLUMN     "usage_withheld_rounds" INTEGER NOT NULL DEFAULT 0;
