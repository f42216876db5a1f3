#!/bin/sh
# Bytes of a filestore (0 when there is none): the size a move needs room for on its target.
#   $1 the filestore directory
set -eu
dir=$1

if [ ! -d "$dir" ]; then
  echo 0
  exit 0
fi
# Not du | cut: a failing du would answer an empty size, read as 0.
size=$(du -sb "$dir")
echo "${size%%	*}"
