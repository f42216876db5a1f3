-- Daily backups of every running subscription (issue 47, point 4) and the drop's filestore rule (point 7).

-- Retention per package: how many daily, weekly and monthly backups the backup server keeps of a
-- tenant (svc's backup server prunes with restic forget --keep-daily/weekly/monthly). A package
-- supplies them to the subscriptions made from it; each 0..366, at least one above 0 (checked by the
-- API: Prisma's schema diff cannot read CHECK constraints).
ALTER TABLE "trial_packages"
    ADD COLUMN "backup_keep_daily" INTEGER NOT NULL DEFAULT 7,
    ADD COLUMN "backup_keep_weekly" INTEGER NOT NULL DEFAULT 4,
    ADD COLUMN "backup_keep_monthly" INTEGER NOT NULL DEFAULT 3;

-- last_backup_at: when the last backup of its database was seen done (by a backup job, or by
-- compute_backup_state). backup_attempted_at: when the schedule last queued one (a failed one is
-- queued again an hour later, not at every run). backup_overdue_since: the 26 h alert, firing since
-- then (null: not firing).
ALTER TABLE "subscriptions"
    ADD COLUMN "backup_keep_daily" INTEGER NOT NULL DEFAULT 7,
    ADD COLUMN "backup_keep_weekly" INTEGER NOT NULL DEFAULT 4,
    ADD COLUMN "backup_keep_monthly" INTEGER NOT NULL DEFAULT 3,
    ADD COLUMN "last_backup_at" TIMESTAMP(3),
    ADD COLUMN "backup_attempted_at" TIMESTAMP(3),
    ADD COLUMN "backup_overdue_since" TIMESTAMP(3);

-- The schedule's settings. backups_watched_since: the 26 h count starts no earlier than this
-- release (subscriptions older than it have no known last backup: they are backed up in the next
-- window, not all alerted at once on upgrade). no_backup_server_alert_at: the one alert of an
-- installation with running subscriptions and no backup server at all (null: not firing).
ALTER TABLE "settings"
    ADD COLUMN "backup_schedule_enabled" BOOLEAN NOT NULL DEFAULT true,
    ADD COLUMN "backup_window_start_hour" INTEGER NOT NULL DEFAULT 1,
    ADD COLUMN "backup_window_hours" INTEGER NOT NULL DEFAULT 6,
    ADD COLUMN "backup_concurrency" INTEGER NOT NULL DEFAULT 2,
    ADD COLUMN "backups_watched_since" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    ADD COLUMN "no_backup_server_alert_at" TIMESTAMP(3);

-- The schedule's query: running subscriptions with a database, oldest backup first.
CREATE INDEX "subscriptions_state_last_backup_at_idx" ON "subscriptions"("state", "last_backup_at");
