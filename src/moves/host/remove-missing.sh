#!/bin/sh
# Removes from a filestore the regular files missing from the source's list on stdin
# (list-for-mirror.sh). Nothing is removed unless the list arrived whole (it ends with the
# end-of-list record), and only files this host's own find lists inside the directory, with paths
# relative to it: find never follows a symbolic link, and the directory itself must not be one, so
# nothing outside the tenant's filestore is touched.
#   $1 the filestore directory   $2 the end-of-list record
set -eu
dir=$1 end=$2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/in"
if [ "$(tail -z -n 1 "$tmp/in" | tr -d '\000')" != "$end" ]; then
  echo "the source's list of files ended early: nothing removed" >&2
  exit 1
fi
if [ -L "$dir" ]; then
  echo "$dir is a symbolic link: nothing removed" >&2
  exit 1
fi
if [ ! -d "$dir" ]; then
  echo "0 file(s) removed"
  exit 0
fi
head -z -n -1 "$tmp/in" > "$tmp/listed"
LC_ALL=C sort -z "$tmp/listed" > "$tmp/keep"
cd "$dir"
find . -type f -print0 > "$tmp/found"
LC_ALL=C sort -z "$tmp/found" > "$tmp/have"
LC_ALL=C comm -z -13 "$tmp/keep" "$tmp/have" > "$tmp/gone"
xargs -0 -r rm -f -- < "$tmp/gone"
printf '%s file(s) removed from %s\n' "$(tr -cd '\000' < "$tmp/gone" | wc -c)" "$dir"
