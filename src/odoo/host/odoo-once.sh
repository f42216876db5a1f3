#!/bin/sh
# Runs odoo-bin (or a launcher of it) once as the odoo user, in the version's source tree, with the
# host's data directory as HOME: a template's build, update and first-page assets, a tenant's update
# in a rollout, a staging copy's neutralization (src/odoo/odoo-once.ts builds its arguments).
#   $1 the source tree   $2 the data directory (odoo's HOME)   $3 the log file Odoo's output goes to
#   $4 a lock file held while Odoo runs (one update of a database at a time), or "" for none
#   $5 "log": stdout and stderr to the log; Odoo's complaints and the end of its output are printed
#      "answer": stderr only to the log; stdout is the program's answer (odoo-bin shell), and Odoo's
#      complaints and the end of its output are printed (on stderr) only when it fails
#   $6… the arguments of /usr/bin/python3 (odoo-bin and its options)
# Exit code: Odoo's; 3 with the reason on stderr when it could not be started (no such tree, the lock
# held for an hour).
set -eu
source=$1 home=$2 log=$3 lock=$4 output=$5
shift 5

cd "$source" || { echo "No Odoo source tree at $source" >&2; exit 3; }
if [ -n "$lock" ]; then
  mkdir -p "$(dirname "$lock")"
  exec 8>"$lock"
  flock -w 3600 8 || { echo 'another update of this database still runs' >&2; exit 3; }
fi

# What Odoo said that matters: its complaints, the module it was at, then the end of its output.
said() {
  grep -E ' (ERROR|CRITICAL|WARNING) |invalid module names|Traceback|Error:|^[A-Za-z.]*(Error|Exception)' "$log" | tail -n 40 || true
  grep -E 'Loading module [A-Za-z0-9_]+|module [A-Za-z0-9_]+: (loading|creating|updating)' "$log" | tail -n 1 | sed 's/^/SVC-LAST-MODULE /' || true
  echo '--- end of output ---'
  tail -n 20 "$log"
}

rc=0
if [ "$output" = answer ]; then
  # The log is written as root (odoo's user cannot write in logs/); the program's answer on stdout.
  setpriv --reuid=odoo --regid=odoo --init-groups env HOME="$home" /usr/bin/python3 "$@" 2>"$log" || rc=$?
  [ "$rc" -eq 0 ] || said >&2
else
  setpriv --reuid=odoo --regid=odoo --init-groups env HOME="$home" /usr/bin/python3 "$@" >"$log" 2>&1 || rc=$?
  said
fi
exit "$rc"
