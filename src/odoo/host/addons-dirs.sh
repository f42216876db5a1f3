#!/bin/sh
# Prints addons=<dir> for each directory named as an argument that holds a module (a folder with a
# manifest): the git deploy paths setup_odoo puts on the addons path.
set -eu
for d in "$@"; do
  for m in "$d"/*/__manifest__.py "$d"/*/__openerp__.py; do
    if [ -f "$m" ]; then echo "addons=$d"; break; fi
  done
done
