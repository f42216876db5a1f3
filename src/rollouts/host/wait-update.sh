#!/bin/sh
# Waits until no update of a database runs on the host: the update holds the database's lock while
# Odoo runs (src/odoo/host/odoo-once.sh); a rollout or a staging refresh resumed after a crash of
# the service waits for an update still running before it puts the database back.
#   $1 the database's lock file
set -eu
lock=$1
mkdir -p -- "$(dirname -- "$lock")"
exec 8>"$lock"
flock -w 3600 8 || { echo 'an update of this database still runs after an hour' >&2; exit 3; }
echo free
