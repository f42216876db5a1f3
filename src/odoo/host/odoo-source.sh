#!/bin/sh
# An Odoo version's source tree on a host, <base>/versions/<name> (setup_odoo, template builds,
# odoo_status; src/odoo/odoo-source.ts builds its arguments). A checked and unpacked tree carries the
# SHA-256 of its tarball (.svc-source-sha256) and what `odoo-bin --version` said of it
# (.svc-odoo-version: starting Odoo to ask takes seconds).
#   installed <tree>: prints the SHA-256 the tree was unpacked from, "none" when it is not there
#   describe <tree>: prints its version line ("Odoo Server 18.0") and addons=<dir> for each of its
#     addons directories; exit code 3 when it has none
#   unpack <versions dir> <version> <tarball> <sha256> <yes|no: remove the tarball (an https download)>
# Exit code 3 with the reason on stderr: a refusal (a checksum that differs, a tarball without odoo-bin).
set -eu
MARKER=.svc-source-sha256
VERSION_MARKER=.svc-odoo-version
PYTHON=/usr/bin/python3

# The version line of the tree in the current directory: its marker, else Odoo asked.
version_line() {
  cat "$VERSION_MARKER" 2>/dev/null || { "$PYTHON" odoo-bin --version 2>/dev/null | grep -m 1 '^Odoo Server'; }
}

installed() {
  if [ -f "$1/$MARKER" ] && [ -f "$1/odoo-bin" ]; then cat "$1/$MARKER"; else echo none; fi
}

describe() {
  cd "$1" || { echo "No Odoo source tree at $1" >&2; exit 3; }
  version_line || { echo "odoo-bin in $1 does not name an Odoo server" >&2; exit 3; }
  for d in "$1/odoo/addons" "$1/addons"; do
    if [ -d "$d" ]; then echo "addons=$d"; fi
  done
}

# Checks the tarball (its SHA-256, an odoo-bin at its top or in its one top directory), unpacks it
# beside the version's current tree, checks that it runs with /usr/bin/python3 (--version), and only
# then puts it in place of the old tree. Any failure before that removes what it unpacked and leaves
# the old tree (and the Odoo running from it) alone.
unpack() {
  versions=$1 version=$2 tar=$3 sha256=$4 remove_tarball=$5
  dest="$versions/$version"
  umask 022
  exec 9>>"$versions/.lock"
  flock -w 900 9 || { echo 'Another set-up held the versions directory for 15 minutes' >&2; exit 1; }
  new="$versions/.new-$version-$$"
  old="$versions/.old-$version-$$"
  cleanup() {
    rm -rf "$new"
    if [ "$remove_tarball" = yes ]; then rm -f "$tar"; fi
  }
  fail() { echo "$1" >&2; cleanup; exit 3; }
  [ -f "$tar" ] || fail "The source $tar does not exist on the host"
  got=$(sha256sum "$tar" | cut -d' ' -f1)
  [ "$got" = "$sha256" ] || fail "Checksum mismatch: the source's SHA-256 is $got, the version names $sha256"
  list=$(tar -tzf "$tar" 2>&1) || fail "The source is not a gzip-compressed tarball: $(printf '%s' "$list" | tail -n 2)"
  entry=$(printf '%s\n' "$list" | grep -E '^(\./)?([^/]+/)?odoo-bin$' | head -n 1) || true
  [ -n "$entry" ] || fail 'The tarball holds no odoo-bin (at its top or in its one top directory): it is not an Odoo source tree'
  strip=$(printf '%s' "${entry#./}" | awk -F/ '{print NF-1}')
  rm -rf "$new"
  mkdir -p "$new"
  tar -xzf "$tar" -C "$new" --strip-components="$strip" --no-same-owner --no-same-permissions || fail 'Unpacking the source failed'
  [ -f "$new/odoo-bin" ] || fail 'The unpacked tree holds no odoo-bin'
  out=$(cd "$new" && "$PYTHON" odoo-bin --version 2>&1) || fail "The source does not run with $PYTHON: $(printf '%s' "$out" | tail -n 3)"
  line=$(printf '%s\n' "$out" | grep -m 1 '^Odoo Server') || fail "odoo-bin --version did not name an Odoo server: $(printf '%s' "$out" | tail -n 3)"
  # Compiled once as root: Odoo's user cannot write into its code, and would compile at every start.
  # A file that does not compile is Odoo's to report when it imports it: not a reason to refuse the tree.
  addons=""
  if [ -d "$new/addons" ]; then addons="$new/addons"; fi
  # shellcheck disable=SC2086 # $addons: no directory, or one without spaces (under the versions directory)
  "$PYTHON" -m compileall -q -j 0 "$new/odoo" $addons >/dev/null 2>&1 || true
  printf '%s\n' "$line" >"$new/$VERSION_MARKER"
  printf '%s\n' "$sha256" >"$new/$MARKER"
  if [ -e "$dest" ]; then mv "$dest" "$old"; fi
  mv "$new" "$dest"
  rm -rf "$old"
  if [ "$remove_tarball" = yes ]; then rm -f "$tar"; fi
  echo "$line"
}

action=$1
shift
case "$action" in
  installed) installed "$@" ;;
  describe) describe "$@" ;;
  unpack) unpack "$@" ;;
  *) echo "unknown action $action" >&2; exit 2 ;;
esac
