#!/bin/sh
# The files of a filestore, NUL-separated (any name survives), then the end-of-list record: written
# only once the whole listing succeeded, so remove-missing.sh on the other host can tell a complete
# list from one cut short.
#   $1 the filestore directory   $2 the end-of-list record (never a path: find prints ./…)
set -eu
dir=$1 end=$2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -d "$dir" ]; then
  cd "$dir"
  find . -type f -print0 > "$tmp/all"
else
  : > "$tmp/all"
fi
cat "$tmp/all"
printf '%s\0' "$end"
