#!/bin/sh
# Writes standard input to a file (root:<group>, <mode>) when it differs from what is there: Odoo's
# configuration, its unit or supervisor script. Prints "changed" or "unchanged".
# Arguments: the file, its mode, its group.
set -eu
path=$1 mode=$2 group=$3
umask 077
cat >"$path.svc-new"
chown "root:$group" "$path.svc-new"
chmod "$mode" "$path.svc-new"
if [ -f "$path" ] && cmp -s "$path" "$path.svc-new"; then
  rm -f "$path.svc-new"
  echo unchanged
else
  mv -f "$path.svc-new" "$path"
  echo changed
fi
