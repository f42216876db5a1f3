#!/bin/sh
# Makes each directory named (the Odoo layout under ODOO_BASE_PATH: src/servers/remote-scripts.ts)
# and prints it; stops at the first that is not a writable directory (one message, not one per directory).
#   $@ the directories
set -eu
for d in "$@"; do
  mkdir -p -- "$d"
  if [ ! -d "$d" ] || [ ! -w "$d" ]; then echo "$d is not a writable directory" >&2; exit 1; fi
  echo "$d"
done
