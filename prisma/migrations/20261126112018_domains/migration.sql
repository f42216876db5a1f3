-- CreateEnum
CREATE TYPE "DomainState" AS ENUM ('pending_dns', 'active', 'failed');

-- CreateTable
CREATE TABLE "domains" (
    "id" SERIAL NOT NULL,
    "subscription_id" INTEGER NOT NULL,
    "hostname" TEXT NOT NULL,
    "is_primary" BOOLEAN NOT NULL DEFAULT false,
    "state" "DomainState" NOT NULL DEFAULT 'pending_dns',
    "dns_target" TEXT,
    "verified_at" TIMESTAMP(3),
    "certificate_not_after" TIMESTAMP(3),
    "certificate_issuer" TEXT,
    "last_error" TEXT,
    "root_server_id" INTEGER,
    "site_file" TEXT,
    "base_url_at" TIMESTAMP(3),
    "expiry_notified_for" TIMESTAMP(3),
    "checked_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "domains_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "domains_hostname_key" ON "domains"("hostname");

-- CreateIndex
CREATE INDEX "domains_subscription_id_idx" ON "domains"("subscription_id");

-- CreateIndex
CREATE INDEX "domains_state_idx" ON "domains"("state");

-- CreateIndex
CREATE UNIQUE INDEX "domains_one_primary_per_subscription" ON "domains"("subscription_id") WHERE (is_primary);

-- AddForeignKey
ALTER TABLE "domains" ADD CONSTRAINT "domains_subscription_id_fkey" FOREIGN KEY ("subscription_id") REFERENCES "subscriptions"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "domains" ADD CONSTRAINT "domains_root_server_id_fkey" FOREIGN KEY ("root_server_id") REFERENCES "root_servers"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
