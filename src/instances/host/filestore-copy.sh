#!/bin/sh
# Copies a filestore directory (src/instances/filestore.ts): hard links, as click-odoo-copydb does
# (Odoo never changes a stored file in place, so a link is a copy of the file as it is now), a plain
# copy where the file system refuses. Made under a temporary name and renamed when complete, so no
# half-copied directory is ever taken for a filestore.
#   $1 the directory copied   $2 the copy
#   $3 "new": the copy must not exist (exit 3); an empty directory when $1 does not exist (a new database)
#      "replace": a copy an earlier run left is replaced; none when $1 does not exist (a safety copy)
set -eu
src=$1 dst=$2 mode=$3
case "$mode" in
  new | replace) ;;
  *) echo "filestore-copy: \"new\" or \"replace\", not \"$mode\"" >&2; exit 2 ;;
esac
if [ "$mode" = new ] && [ -e "$dst" ]; then echo "$dst already exists" >&2; exit 3; fi
parent=$(dirname -- "$dst")
tmp="$dst.svc-tmp-$$"
mkdir -p -- "$parent"
rm -rf -- "$dst".svc-tmp*
if [ "$mode" = replace ]; then rm -rf -- "$dst"; fi

if [ ! -d "$src" ]; then
  if [ "$mode" = replace ]; then echo "no filestore: $src does not exist"; exit 0; fi
  mkdir -- "$tmp"
  # Odoo's user owns the filestores: the new one is owned as its parent is (best effort).
  chown --reference="$parent" -- "$tmp" 2>/dev/null || true
  how="empty: $src does not exist"
elif cp -al -- "$src" "$tmp" 2>/dev/null; then
  how="hard links to $src"
else
  rm -rf -- "$tmp"
  cp -a -- "$src" "$tmp" || { rm -rf -- "$tmp"; exit 1; }
  how="a copy of $src"
fi
mv -T -- "$tmp" "$dst" || { rm -rf -- "$tmp"; exit 1; }
echo "$dst: $how"
