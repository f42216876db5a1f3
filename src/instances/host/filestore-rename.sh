#!/bin/sh
# Renames a filestore directory (src/instances/filestore.ts).
#   $1 the directory renamed   $2 its new name
#   $3 "new": $2 must not exist (exit 3) and $1 must (exit 4)
#      "replace": $1 takes the place of $2 (a safety copy put back); nothing to do once $1 is gone, so
#      an interrupted run is run again safely
set -eu
src=$1 dst=$2 mode=$3
case "$mode" in
  new)
    if [ -e "$dst" ]; then echo "$dst already exists" >&2; exit 3; fi
    if [ ! -d "$src" ]; then echo "$src does not exist" >&2; exit 4; fi
    mv -T -- "$src" "$dst"
    ;;
  replace)
    if [ ! -d "$src" ]; then echo "nothing to put back: $src does not exist"; exit 0; fi
    # The directory replaced is moved aside first: $2 is never missing its files while $1 is there.
    rm -rf -- "$dst.svc-old"
    if [ -e "$dst" ]; then mv -T -- "$dst" "$dst.svc-old"; fi
    mv -T -- "$src" "$dst"
    rm -rf -- "$dst.svc-old"
    ;;
  *) echo "filestore-rename: \"new\" or \"replace\", not \"$mode\"" >&2; exit 2 ;;
esac
echo "$src → $dst"
