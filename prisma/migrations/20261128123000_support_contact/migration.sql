-- AlterTable
ALTER TABLE "settings" ADD COLUMN     "support_contact" TEXT;
