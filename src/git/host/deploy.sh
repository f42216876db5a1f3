#!/bin/sh
# push_commit on the root server (src/git/deploy-script.ts tells the layout): the commit's tarball
# on stdin is unpacked into a new release directory, checked, and only then does the live symlink
# point at it (rename(2): readers see the old release or the new one, never a mix). Deploys of one
# path run one at a time (flock); one queued earlier never replaces a newer one (SEQ).
#   $1 the live path   $2 its releases directory   $3 the new release   $4 the commit   $5 SEQ
#   $6 how many releases are kept   $7 the check of the tree (validate_tree.py's text)
# Exit code 4: the check refused a file (DEPLOY_EXIT.invalid); 75: another deploy held the lock (busy).
set -eu
LIVE=$1 BASE=$2 REL=$3 SHA=$4 SEQ=$5 KEPT=$6 VALIDATE=$7
mkdir -p "$BASE" "$(dirname "$LIVE")"
exec 9>"$BASE/.lock"
flock -w 600 9 || { echo "another deploy of $LIVE is still running" >&2; exit 75; }
LAST=0
if [ -f "$BASE/.deployed-seq" ]; then LAST=$(cat "$BASE/.deployed-seq"); fi
if [ "$LAST" -gt "$SEQ" ]; then
  echo "SVC-SUPERSEDED $(cat "$BASE/.deployed-sha" 2>/dev/null || true)"
  exit 0
fi
# A cache.git left by the earlier git-fetch deploys goes too.
rm -rf "$BASE/cache.git" "$REL"
mkdir -p "$REL"
trap 'rm -rf "$REL"' EXIT
tar -xzf - -C "$REL" --strip-components=1 --no-same-owner --no-same-permissions
if ! python3 -c "$VALIDATE" "$REL"; then exit 4; fi
if [ -e "$LIVE" ] && [ ! -L "$LIVE" ]; then
  mv "$LIVE" "$BASE/before-svc-$SEQ"
  echo "moved the existing $LIVE to $BASE/before-svc-$SEQ"
fi
ln -sfn "$REL" "$LIVE.svc-new"
mv -Tf "$LIVE.svc-new" "$LIVE"
trap - EXIT
echo "$SEQ" > "$BASE/.deployed-seq"
echo "$SHA" > "$BASE/.deployed-sha"
# The newest KEPT releases stay (the names sort by SEQ); never the one just made live.
n=0
for OLD in "$BASE"/r-*; do n=$((n + 1)); done
drop=$((n - KEPT))
for OLD in "$BASE"/r-*; do
  [ "$drop" -gt 0 ] || break
  drop=$((drop - 1))
  [ "$OLD" = "$REL" ] || rm -rf "$OLD"
done
echo "SVC-DEPLOYED $REL"
