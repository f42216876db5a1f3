#!/bin/sh
# Unpacks the tar on stdin into a filestore directory (made when missing), owned as the filestores'
# directory is (odoo), and says how many files it holds now.
#   $1 the filestore directory
set -eu
dir=$1
parent=${dir%/*}

if [ ! -d "$parent" ]; then
  mkdir -p "$parent"
  chown odoo:odoo "$parent"
fi
mkdir -p "$dir"
tar -C "$dir" -xf - --no-same-owner
chown -R --reference="$parent" "$dir"
echo "$(find "$dir" -type f | wc -l) file(s) in $dir"
