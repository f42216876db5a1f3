#!/bin/sh
# The files of a filestore, one relative path a line, sorted (nothing when there is none yet): what
# the receiving host of a move already has (src/moves/move-copy.ts).
#   $1 the filestore directory
set -eu
dir=$1

[ -d "$dir" ] || exit 0
cd "$dir"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Into a file first: a failing find fails the program (a pipe into sort would hide it).
find . -type f > "$tmp"
LC_ALL=C sort "$tmp"
