-- Packages are apps (issue 48): a template records the Odoo modules installed in its database
-- (read after build and update; empty: not known, a template svc did not build), and an Odoo host
-- the modules its addons path holds (listed at setup_odoo and at each build; empty: not listed yet).
ALTER TABLE "database_templates" ADD COLUMN "modules" TEXT[] DEFAULT ARRAY[]::TEXT[];
ALTER TABLE "root_servers" ADD COLUMN "odoo_modules" TEXT[] DEFAULT ARRAY[]::TEXT[];
