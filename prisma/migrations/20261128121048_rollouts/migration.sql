-- CreateEnum
CREATE TYPE "RolloutState" AS ENUM ('pending', 'running', 'done');

-- CreateEnum
CREATE TYPE "RolloutTenantState" AS ENUM ('pending', 'copying', 'updating', 'restoring', 'updated', 'unchanged', 'failed', 'superseded');

-- CreateEnum
CREATE TYPE "RolloutOrder" AS ENUM ('trials_first', 'paid_first', 'oldest_first');

-- CreateTable
CREATE TABLE "rollouts" (
    "id" SERIAL NOT NULL,
    "root_server_id" INTEGER NOT NULL,
    "git_commit_id" INTEGER,
    "deploy_path" TEXT,
    "state" "RolloutState" NOT NULL DEFAULT 'pending',
    "checksums" JSONB,
    "error" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMP(3),
    "finished_at" TIMESTAMP(3),

    CONSTRAINT "rollouts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "rollout_tenants" (
    "id" SERIAL NOT NULL,
    "rollout_id" INTEGER NOT NULL,
    "subscription_id" INTEGER NOT NULL,
    "database_name" TEXT NOT NULL,
    "position" INTEGER NOT NULL,
    "state" "RolloutTenantState" NOT NULL DEFAULT 'pending',
    "modules" TEXT[],
    "safety_copy" TEXT,
    "safety_copy_oid" BIGINT,
    "error" TEXT,
    "started_at" TIMESTAMP(3),
    "finished_at" TIMESTAMP(3),
    "duration_ms" INTEGER,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "rollout_tenants_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "rollout_settings" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "tenants_per_host" INTEGER NOT NULL DEFAULT 1,
    "order" "RolloutOrder" NOT NULL DEFAULT 'trials_first',
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "rollout_settings_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "rollouts_root_server_id_state_id_idx" ON "rollouts"("root_server_id", "state", "id");

-- CreateIndex
CREATE INDEX "rollouts_git_commit_id_idx" ON "rollouts"("git_commit_id");

-- CreateIndex
CREATE INDEX "rollout_tenants_rollout_id_state_position_idx" ON "rollout_tenants"("rollout_id", "state", "position");

-- CreateIndex
CREATE UNIQUE INDEX "rollout_tenants_rollout_id_subscription_id_key" ON "rollout_tenants"("rollout_id", "subscription_id");

-- AddForeignKey
ALTER TABLE "rollouts" ADD CONSTRAINT "rollouts_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "rollouts" ADD CONSTRAINT "rollouts_git_commit_id_fkey" FOREIGN KEY ("git_commit_id") REFERENCES "git_commits"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "rollout_tenants" ADD CONSTRAINT "rollout_tenants_rollout_id_fkey" FOREIGN KEY ("rollout_id") REFERENCES "rollouts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "rollout_tenants" ADD CONSTRAINT "rollout_tenants_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
