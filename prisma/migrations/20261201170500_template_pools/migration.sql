-- Pools (DESIGN §22): a template is available on every Odoo host of its version, built there or
-- copied there from where it was built. content_version counts the template database's contents
-- (build, a successful update, an accepted replacement): a copy made from another version is out
-- of step and not used until it is made again.
ALTER TABLE "database_templates" ADD COLUMN "content_version" INTEGER NOT NULL DEFAULT 0;

CREATE TYPE "TemplateCopyState" AS ENUM ('copying', 'ready', 'failed');

CREATE TABLE "database_template_copies" (
    "id" SERIAL NOT NULL,
    "database_template_id" INTEGER NOT NULL,
    "root_server_id" INTEGER NOT NULL,
    "postgresql_server_id" INTEGER NOT NULL,
    "database_name" TEXT NOT NULL,
    "state" "TemplateCopyState" NOT NULL DEFAULT 'copying',
    "content_version" INTEGER NOT NULL,
    "owner_role" TEXT,
    "system_identifier" TEXT,
    "oid" BIGINT,
    "error" TEXT,
    "seconds" DOUBLE PRECISION,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,
    CONSTRAINT "database_template_copies_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "database_template_copies_database_template_id_root_server_i_key"
    ON "database_template_copies"("database_template_id", "root_server_id");
ALTER TABLE "database_template_copies" ADD CONSTRAINT "database_template_copies_database_template_id_fkey"
    FOREIGN KEY ("database_template_id") REFERENCES "database_templates"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "database_template_copies" ADD CONSTRAINT "database_template_copies_root_server_id_fkey"
    FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "database_template_copies" ADD CONSTRAINT "database_template_copies_postgresql_server_id_fkey"
    FOREIGN KEY ("postgresql_server_id") REFERENCES "postgresql_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Drains (DESIGN §22): a host's tenants moved to the other hosts of its pool a few at a time.
CREATE TYPE "HostDrainState" AS ENUM ('draining', 'done', 'failed', 'stopped');

CREATE TABLE "host_drains" (
    "id" SERIAL NOT NULL,
    "root_server_id" INTEGER NOT NULL,
    "state" "HostDrainState" NOT NULL DEFAULT 'draining',
    "batch_size" INTEGER NOT NULL,
    "moved" INTEGER NOT NULL DEFAULT 0,
    "failed_subscription_ids" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "left_over" TEXT,
    "job_id" TEXT,
    "user_id" INTEGER,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,
    "finished_at" TIMESTAMP(3),
    CONSTRAINT "host_drains_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "host_drains_root_server_id_idx" ON "host_drains"("root_server_id");
ALTER TABLE "host_drains" ADD CONSTRAINT "host_drains_root_server_id_fkey"
    FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE CASCADE ON UPDATE CASCADE;
