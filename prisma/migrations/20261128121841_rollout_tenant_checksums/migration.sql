-- AlterTable
ALTER TABLE "rollout_tenants" ADD COLUMN     "checksums" JSONB;
