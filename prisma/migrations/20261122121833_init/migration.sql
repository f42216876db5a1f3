-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "UserGroup" AS ENUM ('user', 'operator', 'administrator');

-- CreateEnum
CREATE TYPE "EncryptionKeyState" AS ENUM ('active', 'retired');

-- CreateEnum
CREATE TYPE "DnsResolver" AS ENUM ('cloudflare', 'google', 'local');

-- CreateEnum
CREATE TYPE "MessageType" AS ENUM ('email', 'comment', 'notification', 'whatsapp', 'sms', 'auto_comment', 'tracking', 'activity');

-- CreateEnum
CREATE TYPE "ActivityState" AS ENUM ('planned', 'done');

-- CreateEnum
CREATE TYPE "ActionType" AS ENUM ('ssh_command', 'api_call', 'server_action', 'database', 'deployment', 'git', 'webhook', 'settings');

-- CreateEnum
CREATE TYPE "ActionStatus" AS ENUM ('success', 'failure');

-- CreateEnum
CREATE TYPE "SubscriptionState" AS ENUM ('draft', 'confirmed', 'deploying', 'running', 'failed', 'cancelled');

-- CreateEnum
CREATE TYPE "BackupState" AS ENUM ('none', 'ok', 'running', 'failed');

-- CreateEnum
CREATE TYPE "CompanySize" AS ENUM ('1-5', '6-10', '11-30', '30-100', '100+');

-- CreateEnum
CREATE TYPE "TrialRequestState" AS ENUM ('new', 'processing', 'done', 'cancelled');

-- CreateEnum
CREATE TYPE "TrialVerificationState" AS ENUM ('pending', 'verified', 'cancelled');

-- CreateEnum
CREATE TYPE "RootServerState" AS ENUM ('draft', 'confirmed', 'cancel');

-- CreateEnum
CREATE TYPE "ServerState" AS ENUM ('no_monitor', 'online', 'warning', 'offline');

-- CreateEnum
CREATE TYPE "CodeServerState" AS ENUM ('not_installed', 'installed', 'running');

-- CreateEnum
CREATE TYPE "NotificationProvider" AS ENUM ('selfhosted_push', 'cloud_push');

-- CreateEnum
CREATE TYPE "NotificationAuthMethod" AS ENUM ('password', 'token');

-- CreateEnum
CREATE TYPE "GitProvider" AS ENUM ('github');

-- CreateEnum
CREATE TYPE "GitRepositoryState" AS ENUM ('draft', 'active', 'cancel');

-- CreateTable
CREATE TABLE "companies" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "companies_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "users" (
    "id" SERIAL NOT NULL,
    "email" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "group" "UserGroup" NOT NULL DEFAULT 'user',
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "users_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_tokens" (
    "id" SERIAL NOT NULL,
    "user_id" INTEGER NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "token_hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "last_used_at" TIMESTAMP(3),
    "expires_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "api_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "encryption_keys" (
    "version" SERIAL NOT NULL,
    "wrapped_key" TEXT NOT NULL,
    "state" "EncryptionKeyState" NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retired_at" TIMESTAMP(3),

    CONSTRAINT "encryption_keys_pkey" PRIMARY KEY ("version")
);

-- CreateTable
CREATE TABLE "settings" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "keep_root_server_log_period" INTEGER NOT NULL DEFAULT 2,
    "dns_resolver" "DnsResolver" NOT NULL DEFAULT 'cloudflare',
    "webhook_call_log_days" INTEGER NOT NULL DEFAULT 14,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "settings_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "messages" (
    "id" SERIAL NOT NULL,
    "model_name" TEXT NOT NULL,
    "rec_id" INTEGER NOT NULL,
    "message_type" "MessageType" NOT NULL DEFAULT 'comment',
    "subtype_xmlid" TEXT NOT NULL DEFAULT 'mail.mt_note',
    "body" TEXT NOT NULL DEFAULT '',
    "author_id" INTEGER,
    "author_name" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "tracking_values" (
    "id" SERIAL NOT NULL,
    "message_id" INTEGER NOT NULL,
    "field" TEXT NOT NULL,
    "old_value" TEXT,
    "new_value" TEXT,

    CONSTRAINT "tracking_values_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "activities" (
    "id" SERIAL NOT NULL,
    "model_name" TEXT NOT NULL,
    "rec_id" INTEGER NOT NULL,
    "summary" TEXT NOT NULL,
    "note" TEXT NOT NULL DEFAULT '',
    "due_date" TIMESTAMP(3),
    "user_id" INTEGER,
    "state" "ActivityState" NOT NULL DEFAULT 'planned',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "done_at" TIMESTAMP(3),

    CONSTRAINT "activities_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "action_logs" (
    "id" SERIAL NOT NULL,
    "model_name" TEXT NOT NULL,
    "rec_id" INTEGER NOT NULL,
    "action_type" "ActionType" NOT NULL,
    "status" "ActionStatus" NOT NULL DEFAULT 'success',
    "input_text" TEXT NOT NULL DEFAULT '',
    "output_text" TEXT NOT NULL DEFAULT '',
    "user_id" INTEGER,
    "job_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "action_logs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "partners" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "company_name" TEXT,
    "email" TEXT NOT NULL,
    "mobile" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "partners_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "database_templates" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "postgresql_server_id" INTEGER NOT NULL,
    "template_db_name" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "database_templates_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "trial_packages" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "url_string" TEXT NOT NULL,
    "auto_run_subscription" BOOLEAN NOT NULL DEFAULT false,
    "packages" TEXT[],
    "user_limit" INTEGER NOT NULL DEFAULT 1,
    "storage_limit_gb" INTEGER NOT NULL DEFAULT 1,
    "stage_limit" INTEGER NOT NULL DEFAULT 1,
    "trial_duration_days" INTEGER NOT NULL DEFAULT 14,
    "grace_period_days" INTEGER NOT NULL DEFAULT 7,
    "model_limits" JSONB NOT NULL DEFAULT '{}',
    "database_template_id" INTEGER,
    "active" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "trial_packages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "subscriptions" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "partner_id" INTEGER NOT NULL,
    "is_trial" BOOLEAN NOT NULL DEFAULT false,
    "state" "SubscriptionState" NOT NULL DEFAULT 'draft',
    "packages" TEXT[],
    "user_limit" INTEGER NOT NULL DEFAULT 1,
    "storage_limit_gb" INTEGER NOT NULL DEFAULT 1,
    "stage_limit" INTEGER NOT NULL DEFAULT 1,
    "trial_duration_days" INTEGER NOT NULL DEFAULT 0,
    "grace_period_days" INTEGER NOT NULL DEFAULT 0,
    "model_limits" JSONB NOT NULL DEFAULT '{}',
    "trial_end_date" TIMESTAMP(3),
    "grace_end_date" TIMESTAMP(3),
    "database_template_id" INTEGER,
    "database_name" TEXT,
    "backup_server_id" INTEGER,
    "backup_state" "BackupState" NOT NULL DEFAULT 'none',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "subscriptions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "trial_requests" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "company_name" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "mobile" TEXT NOT NULL,
    "company_size" "CompanySize" NOT NULL,
    "trial_package_id" INTEGER NOT NULL,
    "partner_id" INTEGER,
    "subscription_id" INTEGER,
    "database_template_id" INTEGER,
    "state" "TrialRequestState" NOT NULL DEFAULT 'new',
    "notes" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "trial_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "trial_verifications" (
    "id" SERIAL NOT NULL,
    "contact_name" TEXT NOT NULL,
    "company_name" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "mobile" TEXT NOT NULL,
    "company_size" "CompanySize" NOT NULL,
    "trial_package_id" INTEGER NOT NULL,
    "access_token" TEXT NOT NULL,
    "code_hash" TEXT NOT NULL,
    "code_expiry" TIMESTAMP(3) NOT NULL,
    "failed_attempts" INTEGER NOT NULL DEFAULT 0,
    "codes_sent" INTEGER NOT NULL DEFAULT 0,
    "last_code_sent" TIMESTAMP(3),
    "state" "TrialVerificationState" NOT NULL DEFAULT 'pending',
    "ip_address" TEXT NOT NULL,
    "trial_request_id" INTEGER,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "trial_verifications_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhooks" (
    "id" SERIAL NOT NULL,
    "token" TEXT NOT NULL,
    "model_name" TEXT NOT NULL,
    "rec_id" INTEGER NOT NULL,
    "trigger_action" TEXT,
    "message_type" "MessageType" NOT NULL DEFAULT 'comment',
    "subtype_xmlid" TEXT NOT NULL DEFAULT 'mail.mt_note',
    "active" BOOLEAN NOT NULL DEFAULT true,
    "signing_secret" TEXT,
    "last_called_at" TIMESTAMP(3),
    "call_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "webhooks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_calls" (
    "id" BIGSERIAL NOT NULL,
    "webhook_id" INTEGER NOT NULL,
    "called_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "status" INTEGER NOT NULL,
    "duration_ms" DOUBLE PRECISION NOT NULL,
    "source_ip" TEXT NOT NULL,
    "body_size" INTEGER NOT NULL,
    "error" TEXT,

    CONSTRAINT "webhook_calls_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "root_servers" (
    "id" SERIAL NOT NULL,
    "name" TEXT,
    "ip" TEXT NOT NULL,
    "username" TEXT NOT NULL DEFAULT 'root',
    "password" TEXT,
    "key" TEXT,
    "port" INTEGER NOT NULL DEFAULT 22,
    "state" "RootServerState" NOT NULL DEFAULT 'draft',
    "sudo_user" BOOLEAN NOT NULL DEFAULT false,
    "sudo_user_no_password" BOOLEAN NOT NULL DEFAULT false,
    "uuid" TEXT NOT NULL,
    "host_key" TEXT,
    "monitoring_enabled" BOOLEAN NOT NULL DEFAULT false,
    "monitor_update_interval" TEXT NOT NULL DEFAULT '1m',
    "server_state" "ServerState" NOT NULL DEFAULT 'no_monitor',
    "monitor_failures" INTEGER NOT NULL DEFAULT 0,
    "last_monitor_at" TIMESTAMP(3),
    "code_server_port" INTEGER NOT NULL DEFAULT 8080,
    "code_server_password" TEXT,
    "code_server_domain" TEXT,
    "code_server_state" "CodeServerState" NOT NULL DEFAULT 'not_installed',
    "dir_init_done" BOOLEAN NOT NULL DEFAULT false,
    "cmd" TEXT,
    "cmd_output" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "root_servers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "root_server_monitor_logs" (
    "id" BIGSERIAL NOT NULL,
    "root_server_id" INTEGER NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "cpu_percent" DOUBLE PRECISION NOT NULL,
    "ram_used_bytes" BIGINT NOT NULL,
    "ram_total_bytes" BIGINT NOT NULL,
    "ram_percent" DOUBLE PRECISION NOT NULL,
    "disk_used_bytes" BIGINT NOT NULL,
    "disk_total_bytes" BIGINT NOT NULL,
    "disk_percent" DOUBLE PRECISION NOT NULL,
    "net_rx_bytes_per_s" DOUBLE PRECISION NOT NULL,
    "net_tx_bytes_per_s" DOUBLE PRECISION NOT NULL,
    "load_1" DOUBLE PRECISION NOT NULL,
    "load_5" DOUBLE PRECISION NOT NULL,
    "load_15" DOUBLE PRECISION NOT NULL,

    CONSTRAINT "root_server_monitor_logs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "postgresql_servers" (
    "id" SERIAL NOT NULL,
    "name" TEXT,
    "ip" TEXT NOT NULL,
    "username" TEXT,
    "password" TEXT,
    "port" INTEGER NOT NULL DEFAULT 5432,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "postgresql_servers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "backup_servers" (
    "id" SERIAL NOT NULL,
    "name" TEXT,
    "url" TEXT NOT NULL,
    "download_url" TEXT NOT NULL,
    "api_key" TEXT NOT NULL,
    "drop_db_path" TEXT NOT NULL DEFAULT '/svc/database/drop',
    "backup_db_path" TEXT NOT NULL DEFAULT '/svc/database/backup',
    "restore_db_path" TEXT NOT NULL DEFAULT '/svc/database/restore',
    "enable_local_backup" BOOLEAN NOT NULL DEFAULT false,
    "enable_cloud_backup" BOOLEAN NOT NULL DEFAULT false,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "backup_servers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "backup_cloud_accounts" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "remote_id" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "name" TEXT,
    "backup_server_id" INTEGER NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "backup_cloud_accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "notification_servers" (
    "id" SERIAL NOT NULL,
    "name" TEXT,
    "company_id" INTEGER NOT NULL DEFAULT 1,
    "provider" "NotificationProvider" NOT NULL,
    "url" TEXT,
    "is_default" BOOLEAN,
    "auto_generate_tokens" BOOLEAN NOT NULL DEFAULT false,
    "token_expiry_days" INTEGER NOT NULL DEFAULT 365,
    "auth_enabled" BOOLEAN NOT NULL DEFAULT false,
    "auth_method" "NotificationAuthMethod",
    "username" TEXT,
    "password" TEXT,
    "auth_token" TEXT,
    "fcm_project_id" TEXT,
    "fcm_server_key" TEXT,
    "fcm_service_account_json" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "notification_servers_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "notification_user_tokens" (
    "id" SERIAL NOT NULL,
    "notification_server_id" INTEGER NOT NULL,
    "user_id" INTEGER NOT NULL,
    "token" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "notification_user_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "git_accounts" (
    "id" SERIAL NOT NULL,
    "name" TEXT,
    "access_token" TEXT NOT NULL,
    "git_provider" "GitProvider" NOT NULL DEFAULT 'github',
    "user_id" INTEGER NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "git_accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "git_repositories" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "branch_name" TEXT NOT NULL,
    "git_account_id" INTEGER NOT NULL,
    "webhook_id" TEXT,
    "inbound_webhook_id" INTEGER,
    "last_commit_id" INTEGER,
    "state" "GitRepositoryState" NOT NULL DEFAULT 'draft',
    "root_server_id" INTEGER,
    "deploy_path" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "git_repositories_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "git_commits" (
    "id" SERIAL NOT NULL,
    "commit_id" TEXT NOT NULL,
    "commit_message" TEXT NOT NULL DEFAULT '',
    "commit_by" TEXT NOT NULL DEFAULT '',
    "branch" TEXT NOT NULL,
    "repository_id" INTEGER NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "git_commits_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "users_email_key" ON "users"("email");

-- CreateIndex
CREATE UNIQUE INDEX "api_tokens_token_hash_key" ON "api_tokens"("token_hash");

-- CreateIndex
CREATE INDEX "messages_model_name_rec_id_id_idx" ON "messages"("model_name", "rec_id", "id");

-- CreateIndex
CREATE INDEX "tracking_values_message_id_idx" ON "tracking_values"("message_id");

-- CreateIndex
CREATE INDEX "activities_model_name_rec_id_idx" ON "activities"("model_name", "rec_id");

-- CreateIndex
CREATE INDEX "action_logs_model_name_rec_id_id_idx" ON "action_logs"("model_name", "rec_id", "id");

-- CreateIndex
CREATE INDEX "action_logs_action_type_id_idx" ON "action_logs"("action_type", "id");

-- CreateIndex
CREATE UNIQUE INDEX "partners_email_key" ON "partners"("email");

-- CreateIndex
CREATE UNIQUE INDEX "trial_packages_url_string_key" ON "trial_packages"("url_string");

-- CreateIndex
CREATE UNIQUE INDEX "subscriptions_database_name_key" ON "subscriptions"("database_name");

-- CreateIndex
CREATE UNIQUE INDEX "trial_requests_email_trial_package_id_key" ON "trial_requests"("email", "trial_package_id");

-- CreateIndex
CREATE UNIQUE INDEX "trial_verifications_access_token_key" ON "trial_verifications"("access_token");

-- CreateIndex
CREATE UNIQUE INDEX "trial_verifications_trial_request_id_key" ON "trial_verifications"("trial_request_id");

-- CreateIndex
CREATE INDEX "trial_verifications_email_created_at_idx" ON "trial_verifications"("email", "created_at");

-- CreateIndex
CREATE INDEX "trial_verifications_ip_address_created_at_idx" ON "trial_verifications"("ip_address", "created_at");

-- CreateIndex
CREATE INDEX "trial_verifications_email_trial_package_id_state_idx" ON "trial_verifications"("email", "trial_package_id", "state");

-- CreateIndex
CREATE UNIQUE INDEX "webhooks_token_key" ON "webhooks"("token");

-- CreateIndex
CREATE INDEX "webhook_calls_webhook_id_called_at_idx" ON "webhook_calls"("webhook_id", "called_at");

-- CreateIndex
CREATE INDEX "webhook_calls_called_at_idx" ON "webhook_calls"("called_at");

-- CreateIndex
CREATE UNIQUE INDEX "root_servers_uuid_key" ON "root_servers"("uuid");

-- CreateIndex
CREATE INDEX "root_server_monitor_logs_root_server_id_created_at_idx" ON "root_server_monitor_logs"("root_server_id", "created_at");

-- CreateIndex
CREATE INDEX "root_server_monitor_logs_created_at_idx" ON "root_server_monitor_logs"("created_at");

-- CreateIndex
CREATE UNIQUE INDEX "backup_cloud_accounts_backup_server_id_uuid_key" ON "backup_cloud_accounts"("backup_server_id", "uuid");

-- CreateIndex
CREATE UNIQUE INDEX "notification_servers_company_id_is_default_key" ON "notification_servers"("company_id", "is_default");

-- CreateIndex
CREATE UNIQUE INDEX "notification_user_tokens_notification_server_id_user_id_key" ON "notification_user_tokens"("notification_server_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "git_repositories_inbound_webhook_id_key" ON "git_repositories"("inbound_webhook_id");

-- CreateIndex
CREATE UNIQUE INDEX "git_repositories_last_commit_id_key" ON "git_repositories"("last_commit_id");

-- CreateIndex
CREATE UNIQUE INDEX "git_commits_repository_id_commit_id_key" ON "git_commits"("repository_id", "commit_id");

-- AddForeignKey
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "tracking_values" ADD CONSTRAINT "tracking_values_message_id_fkey" FOREIGN KEY ("message_id") REFERENCES "messages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "database_templates" ADD CONSTRAINT "database_templates_postgresql_server_id_fkey" FOREIGN KEY ("postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_packages" ADD CONSTRAINT "trial_packages_database_template_id_fkey" FOREIGN KEY ("database_template_id") REFERENCES "database_templates"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_database_template_id_fkey" FOREIGN KEY ("database_template_id") REFERENCES "database_templates"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_backup_server_id_fkey" FOREIGN KEY ("backup_server_id") REFERENCES "backup_servers"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_requests" ADD CONSTRAINT "trial_requests_trial_package_id_fkey" FOREIGN KEY ("trial_package_id") REFERENCES "trial_packages"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_requests" ADD CONSTRAINT "trial_requests_partner_id_fkey" FOREIGN KEY ("partner_id") REFERENCES "partners"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_requests" ADD CONSTRAINT "trial_requests_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_requests" ADD CONSTRAINT "trial_requests_database_template_id_fkey" FOREIGN KEY ("database_template_id") REFERENCES "database_templates"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_verifications" ADD CONSTRAINT "trial_verifications_trial_package_id_fkey" FOREIGN KEY ("trial_package_id") REFERENCES "trial_packages"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "trial_verifications" ADD CONSTRAINT "trial_verifications_trial_request_id_fkey" FOREIGN KEY ("trial_request_id") REFERENCES "trial_requests"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_calls" ADD CONSTRAINT "webhook_calls_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "root_server_monitor_logs" ADD CONSTRAINT "root_server_monitor_logs_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "backup_cloud_accounts" ADD CONSTRAINT "backup_cloud_accounts_backup_server_id_fkey" FOREIGN KEY ("backup_server_id") REFERENCES "backup_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "notification_servers" ADD CONSTRAINT "notification_servers_company_id_fkey" FOREIGN KEY ("company_id") REFERENCES "companies"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "notification_user_tokens" ADD CONSTRAINT "notification_user_tokens_notification_server_id_fkey" FOREIGN KEY ("notification_server_id") REFERENCES "notification_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_accounts" ADD CONSTRAINT "git_accounts_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_repositories" ADD CONSTRAINT "git_repositories_git_account_id_fkey" FOREIGN KEY ("git_account_id") REFERENCES "git_accounts"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_repositories" ADD CONSTRAINT "git_repositories_inbound_webhook_id_fkey" FOREIGN KEY ("inbound_webhook_id") REFERENCES "webhooks"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_repositories" ADD CONSTRAINT "git_repositories_last_commit_id_fkey" FOREIGN KEY ("last_commit_id") REFERENCES "git_commits"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_repositories" ADD CONSTRAINT "git_repositories_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "git_commits" ADD CONSTRAINT "git_commits_repository_id_fkey" FOREIGN KEY ("repository_id") REFERENCES "git_repositories"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Seed: the default company (DESIGN §6) and the settings singleton.
INSERT INTO "companies" ("id", "name") VALUES (1, 'Default company');
SELECT setval(pg_get_serial_sequence('companies', 'id'), 1);
INSERT INTO "settings" ("id", "updated_at") VALUES (1, CURRENT_TIMESTAMP);
