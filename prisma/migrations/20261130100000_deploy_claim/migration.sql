-- A deployment claims its subscription with its job (operation deploy, operation_job_id), so the
-- lost-operations sweep finds one whose job Redis lost.
ALTER TYPE "SubscriptionOperation" ADD VALUE 'deploy';
