-- AlterEnum
ALTER TYPE "ActionStatus" ADD VALUE 'running';

-- CreateIndex
CREATE INDEX "action_logs_job_id_idx" ON "action_logs"("job_id");
