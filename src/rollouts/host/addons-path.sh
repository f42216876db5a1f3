#!/bin/sh
# The addons_path of an Odoo configuration, and only that line: the file holds the database password
# (src/rollouts/rollout-scripts.ts).
#   $1 the configuration file
set -eu
sed -n 's/^addons_path *= *//p' "$1"
