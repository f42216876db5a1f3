#!/usr/bin/env bash
# `npm run test:odoo`: the suite that installs and runs a real Odoo on this machine (as root, through
# the tests' own sshd), from the source tarballs named by ODOO_SOURCE (comma-separated paths). It
# never downloads anything: without ODOO_SOURCE it stops and says how to get a source.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${ODOO_SOURCE:-}" ]; then
  cat >&2 <<'MSG'
ODOO_SOURCE is not set: npm run test:odoo needs an Odoo source tree as a .tar.gz (it never downloads one).
  ODOO_SOURCE=/path/odoo-18.0.tar.gz[,/path/odoo-19.0.tar.gz] npm run test:odoo
A source is a tarball of Odoo's server tree (odoo-bin at its top or in its one top directory), for
example from Odoo's official sources:
  git clone --depth 1 --branch 18.0 https://github.com/odoo/odoo.git odoo-18.0
  tar czf odoo-18.0.tar.gz odoo-18.0
The suite runs it with Debian 12's python3-* packages (installed by setup_odoo) as root on this
machine, on loopback only.
MSG
  exit 2
fi
IFS=',' read -r -a sources <<<"$ODOO_SOURCE"
for s in "${sources[@]}"; do
  [ -f "$s" ] || { echo "ODOO_SOURCE: $s is not a file" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo 'npm run test:odoo installs packages and an odoo user: run it as root' >&2; exit 2; }

bash scripts/prerequisites.sh
exec npx vitest run --config vitest.odoo.config.ts "$@"
