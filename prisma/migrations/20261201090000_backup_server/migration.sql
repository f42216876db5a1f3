-- svc's own backup server (a role of svc: npm run backup-server) keeps its ledger in svc's database.
-- backup_repositories: where it stores backups with restic: its local repository and each cloud
-- account (what GET /api/cloud-accounts lists). Passwords and credentials are svc ciphertexts.
CREATE TABLE "backup_repositories" (
    "id" SERIAL NOT NULL,
    "backup_server_id" INTEGER NOT NULL,
    "uuid" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "name" TEXT,
    "location" TEXT NOT NULL,
    "credentials" TEXT,
    "password" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "backup_repositories_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "backup_repositories_backup_server_id_uuid_key" ON "backup_repositories"("backup_server_id", "uuid");
ALTER TABLE "backup_repositories" ADD CONSTRAINT "backup_repositories_backup_server_id_fkey" FOREIGN KEY ("backup_server_id") REFERENCES "backup_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- tenant_backups: the backups GET /api/backups lists. One backup is one tenant as a unit (database
-- dump and filestore), a restic snapshot in each repository it went to (snapshots: uuid → id).
CREATE TABLE "tenant_backups" (
    "id" SERIAL NOT NULL,
    "backup_server_id" INTEGER NOT NULL,
    "db_name" TEXT NOT NULL,
    "subscription_id" INTEGER,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "error" TEXT,
    "snapshots" JSONB NOT NULL DEFAULT '{}',
    "size_bytes" BIGINT,
    "added_bytes" BIGINT,
    "files" INTEGER,
    "lease_until" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMP(3),
    "finished_at" TIMESTAMP(3),
    "verified_at" TIMESTAMP(3),

    CONSTRAINT "tenant_backups_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "tenant_backups_backup_server_id_db_name_id_idx" ON "tenant_backups"("backup_server_id", "db_name", "id");
CREATE INDEX "tenant_backups_backup_server_id_state_id_idx" ON "tenant_backups"("backup_server_id", "state", "id");
ALTER TABLE "tenant_backups" ADD CONSTRAINT "tenant_backups_backup_server_id_fkey" FOREIGN KEY ("backup_server_id") REFERENCES "backup_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- backup_restores: what POST {restore_db_path} asked for, run by the backup server like a backup.
CREATE TABLE "backup_restores" (
    "id" SERIAL NOT NULL,
    "backup_server_id" INTEGER NOT NULL,
    "backup_id" INTEGER NOT NULL,
    "db_name" TEXT NOT NULL,
    "target_db_name" TEXT NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "error" TEXT,
    "lease_until" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMP(3),
    "finished_at" TIMESTAMP(3),

    CONSTRAINT "backup_restores_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "backup_restores_backup_server_id_state_id_idx" ON "backup_restores"("backup_server_id", "state", "id");
ALTER TABLE "backup_restores" ADD CONSTRAINT "backup_restores_backup_server_id_fkey" FOREIGN KEY ("backup_server_id") REFERENCES "backup_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "backup_restores" ADD CONSTRAINT "backup_restores_backup_id_fkey" FOREIGN KEY ("backup_id") REFERENCES "tenant_backups"("id") ON DELETE CASCADE ON UPDATE CASCADE;
