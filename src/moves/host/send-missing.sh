#!/bin/sh
# A tar (on stdout) of the files of a filestore missing from the list read on stdin (list-files.sh on
# the receiving host). A file Odoo removed meanwhile is left out (--ignore-failed-read); the count
# goes to stderr.
#   $1 the filestore directory
set -eu
dir=$1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LC_ALL=C sort > "$tmp/have"
if [ -d "$dir" ]; then
  cd "$dir"
  # A failing find fails the program: a file it missed would never be sent.
  find . -type f > "$tmp/found"
  LC_ALL=C sort "$tmp/found" > "$tmp/all"
else
  : > "$tmp/all"
  cd /
fi
LC_ALL=C comm -23 "$tmp/all" "$tmp/have" > "$tmp/send"
echo "$(wc -l < "$tmp/send") file(s) sent" >&2
tar -cf - --no-recursion --ignore-failed-read -T "$tmp/send"
