#!/bin/sh
# Installs the Debian packages named as arguments that are missing (none missing: nothing runs; one
# dpkg-query for all of them). Exit code 3 (with the reason on stderr): packages missing and no apt-get.
set -eu
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null | awk '/ install ok installed$/ {print $1}') || true
missing=""
for p in "$@"; do
  printf '%s\n' "$installed" | grep -qx "$p" || missing="$missing $p"
done
if [ -z "$missing" ]; then echo "all $# packages present"; exit 0; fi
command -v apt-get >/dev/null 2>&1 || { echo "Missing packages:$missing, and no apt-get to install them" >&2; exit 3; }
export DEBIAN_FRONTEND=noninteractive
# Another apt run (the set-up of a second Odoo service on this host) holds the lock for a while.
apt="apt-get -q -y -o DPkg::Lock::Timeout=600 --no-install-recommends"
# shellcheck disable=SC2086 # $apt and $missing are word lists (package names hold no spaces)
$apt install $missing || { apt-get -q -o DPkg::Lock::Timeout=600 update && $apt install $missing; } || exit 1
echo "installed:$missing"
