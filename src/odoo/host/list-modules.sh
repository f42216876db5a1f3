#!/bin/sh
# Prints the Odoo modules an Odoo service of this host can install: one `module=<name>` line for each
# folder holding a __manifest__.py in a directory of its configuration's addons_path (Odoo's own rule
# for a module). Argument: the configuration file. Exit code 3 (with a message on stderr): no such
# file. A configuration without addons_path (not one setup_odoo wrote) lists nothing: not known.
# Run as root (the file is root:odoo 0640).
set -eu
config="$1"
[ -r "$config" ] || { echo "No Odoo configuration at $config: run setup_odoo" >&2; exit 3; }
paths=$(sed -n 's/^addons_path *= *//p' "$config" | tail -n 1)
IFS=','
for dir in $paths; do
  for manifest in "$dir"/*/__manifest__.py; do
    [ -f "$manifest" ] || continue
    name=${manifest%/__manifest__.py}
    echo "module=${name##*/}"
  done
done
:
