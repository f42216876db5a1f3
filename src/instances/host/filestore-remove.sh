#!/bin/sh
# Removes filestore directories and any copy of them left half-made (src/instances/filestore.ts).
#   $1… the directories
set -eu
for dir in "$@"; do
  rm -rf -- "$dir" "$dir".svc-tmp*
  echo "$dir removed"
done
