#!/bin/sh
# svc's own addons on a host, <base>/svc-addons (src/odoo/odoo-svc-addons.ts).
#   sum <dir>: prints the checksum of the tree there ("none" when there is none)
#   install <base> <dir> <sha256>: unpacks the tarball on standard input beside <dir>, checks it
#     against <sha256>, and only then puts it in place: root's, readable by every user (Odoo's reads
#     it), writable by root only. Exit code 3: the tree that arrived is not the one sent.
# The checksum is the SHA-256 of what sha256sum prints for the tree's files sorted by path, as
# addonsBundle computes it. A step of its pipe that failed makes another checksum, never a match.
set -eu

tree_sum() {
  find . -name __pycache__ -prune -o -type f ! -name '*.pyc' ! -name '.svc-*' -print | LC_ALL=C sort \
    | xargs -r -d '\n' sha256sum | sha256sum | cut -d' ' -f1
}

sum() {
  if [ -d "$1" ]; then cd "$1" && tree_sum; else echo none; fi
}

install() {
  base=$1 dir=$2 sha256=$3
  umask 022
  exec 9>>"$base/.svc-addons.lock"
  flock -w 300 9 || { echo 'Another set-up held the svc-addons directory for 5 minutes' >&2; exit 1; }
  new="$base/.svc-addons.new-$$" old="$base/.svc-addons.old-$$"
  rm -rf "$new"
  mkdir "$new"
  tar -xzf - -C "$new" --no-same-owner --no-same-permissions
  got=$(cd "$new" && tree_sum)
  [ "$got" = "$sha256" ] || { rm -rf "$new"; echo "svc's addons arrived with checksum $got, not $sha256" >&2; exit 3; }
  chown -R root:root "$new"
  chmod -R u=rwX,go=rX "$new"
  if [ -e "$dir" ]; then mv "$dir" "$old"; fi
  mv "$new" "$dir"
  rm -rf "$old"
  echo changed
}

action=$1
shift
case "$action" in
  sum) sum "$@" ;;
  install) install "$@" ;;
  *) echo "unknown action $action" >&2; exit 2 ;;
esac
