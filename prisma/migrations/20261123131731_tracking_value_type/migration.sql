-- AlterTable
ALTER TABLE "tracking_values" ADD COLUMN     "value_type" TEXT NOT NULL DEFAULT 'text';
