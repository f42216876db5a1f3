-- AlterTable
ALTER TABLE "backup_servers" ALTER COLUMN "api_key" DROP NOT NULL;
