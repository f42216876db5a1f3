-- AlterTable
ALTER TABLE "settings" ADD COLUMN     "brand_name" TEXT NOT NULL DEFAULT 'svc',
ADD COLUMN     "privacy_url" TEXT;
