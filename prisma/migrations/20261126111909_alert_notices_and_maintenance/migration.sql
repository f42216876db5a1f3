-- AlterTable
ALTER TABLE "alert_rules" ADD COLUMN     "repeat_minutes" INTEGER NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "alerts" ADD COLUMN     "last_notice_at" TIMESTAMP(3),
ADD COLUMN     "repeats" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "resolved_reason" TEXT,
ADD COLUMN     "silenced" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "silenced_reason" TEXT;

-- CreateTable
CREATE TABLE "maintenance_windows" (
    "id" SERIAL NOT NULL,
    "root_server_ids" INTEGER[],
    "starts_at" TIMESTAMP(3) NOT NULL,
    "ends_at" TIMESTAMP(3) NOT NULL,
    "reason" TEXT NOT NULL DEFAULT '',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "maintenance_windows_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "maintenance_windows_ends_at_idx" ON "maintenance_windows"("ends_at");

-- Alerts opened before this migration were told when they opened.
UPDATE "alerts" SET "last_notice_at" = "started_at";
