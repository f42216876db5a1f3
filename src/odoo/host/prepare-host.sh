#!/bin/sh
# The odoo system user and an Odoo base directory's folders; the data directory and what is in it
# become odoo's. Arguments: the base directory, the data directory, the tenant roles' directory.
set -eu
base=$1 data_dir=$2 tenant_roles=$3
if id odoo >/dev/null 2>&1; then
  echo "user odoo present"
else
  useradd --system --user-group --home-dir "$data_dir" --no-create-home --shell /usr/sbin/nologin odoo || id odoo >/dev/null
  echo "user odoo created"
fi
for d in versions config logs run data addons custom-addons backups; do mkdir -p "$base/$d"; done
chmod 755 "$base" "$base/versions"
chown root:odoo "$base/config"
chmod 750 "$base/config"
# Odoo's output names logins, databases and URLs with tokens: root's and odoo's only, files there before included.
chown root:odoo "$base/logs"
chmod 750 "$base/logs"
find "$base/logs" -mindepth 1 ! -group odoo -exec chgrp -h odoo {} +
find "$base/logs" -mindepth 1 ! -type l -perm /007 -exec chmod o-rwx {} +
# Each customer database's role and password (svc's addon reads them: tenant_db.py).
mkdir -p "$tenant_roles"
chown root:odoo "$tenant_roles"
chmod 750 "$tenant_roles"
# Filestores copied in as root before Odoo ran here become odoo's (only what is not already).
find "$data_dir" ! -user odoo -exec chown -h odoo:odoo {} +
chmod 750 "$data_dir"
