#!/bin/sh
# A tenant's maintenance flag on its Odoo host (src/instances/maintenance-flag.ts): while
# <data_dir>/svc-maintenance/<database> exists, svc's addon (odoo-addons/svc_instance/maintenance.py)
# answers the database's requests with the maintenance page.
#   $1 Odoo's data directory   $2 the database   $3 "on" or "off"
set -eu
dir="$1/svc-maintenance" database=$2
flag="$dir/$database"
case "$3" in
  on)
    mkdir -p -- "$dir"
    chmod 755 -- "$dir"
    date -u +%Y-%m-%dT%H:%M:%SZ >"$flag"
    chmod 644 -- "$flag"
    ;;
  off) rm -f -- "$flag" ;;
  *) echo "maintenance-flag: \"on\" or \"off\", not \"$3\"" >&2; exit 2 ;;
esac
echo "maintenance $3: $database"
