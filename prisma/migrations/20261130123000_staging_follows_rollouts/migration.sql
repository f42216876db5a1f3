-- Staging copies follow the rollouts of their host (docs/staging.md): a copy whose host's code a
-- rollout changed is stale (the rollout and its commit) until refreshed (-u all, after a safety
-- copy it is put back from when the update fails); the copy's oid, as for a subscription's database.
ALTER TYPE "StagingState" ADD VALUE 'refreshing';
ALTER TABLE "staging_instances" ADD COLUMN "database_oid" BIGINT;
ALTER TABLE "staging_instances" ADD COLUMN "stale_rollout_id" INTEGER;
ALTER TABLE "staging_instances" ADD COLUMN "stale_commit" TEXT;
ALTER TABLE "staging_instances" ADD COLUMN "safety_copy" TEXT;
ALTER TABLE "staging_instances" ADD COLUMN "safety_copy_oid" BIGINT;
