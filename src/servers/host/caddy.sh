#!/bin/sh
# Caddy on a root server (src/servers/caddy.ts names the paths, setup_proxy and the customer
# domains' site files run the actions). Changes of the configuration take one lock at a time, are
# checked with `caddy validate` and loaded with `caddy reload`; a change Caddy refuses is undone.
#   $1 the main Caddyfile   $2 the directory of the site files   $3 Caddy's log   $4 the admin socket's directory
#   $5 the action, then its arguments:
#      install                         Caddy from the OS packages when missing; its directories and log
#      enable MARKER                   $1.svc-new checked, put in place, loaded (MARKER: line 1 of svc's own)
#      write-site FILE                 FILE from stdin, loaded; prints "log-offset N", then "changed" or "unchanged"
#      remove-site FILE                FILE taken out, loaded; prints "removed" or "absent"
#      wait-issuance HOST OFFSET SECS  the log line of the certificate outcome of HOST, or "timeout"
#      reload                          the configuration loaded into the running Caddy
# Exit code 3: a refusal worded on stderr (the lock not taken, a configuration Caddy refused).
set -eu
caddyfile=$1 sites=$2 log=$3 admin_dir=$4 action=$5
shift 5
socket="$admin_dir/admin.sock"
lock="$sites/.lock"
# Caddy's default admin address: where a Caddy set up before the socket listens until it is reloaded.
default_admin=localhost:2019

# The last lines of a text, on stderr.
tell() { printf '%s\n' "$1" | tail -n "$2" >&2; }

# Takes the configuration lock on descriptor 9 (waits up to a minute for another change to end).
take_lock() {
  # Looked at first: a redirection that fails ends sh at once, before any message of ours.
  if [ ! -d "$sites" ]; then echo "Cannot open $lock: run setup_proxy on the root server first" >&2; exit 3; fi
  exec 9>>"$lock"
  flock -w 60 9 || { echo 'Another change of the Caddy configuration held the lock for a minute' >&2; exit 3; }
}

# Loads the configuration into the running Caddy through its admin socket (Caddy keeps the old one
# when this fails); where there is no socket yet (a host set up before it, until setup_proxy runs
# again), through Caddy's default admin address, which that reload then closes.
reload() {
  if [ -S "$socket" ]; then address="unix/$socket"; else address=$default_admin; fi
  caddy reload --config "$caddyfile" --adapter caddyfile --address "$address"
}

# validate and reload, or put the site file back ($f.old when there was one, else none) and refuse.
load_or_restore() {
  if ! out=$(caddy validate --config "$caddyfile" --adapter caddyfile 2>&1); then
    restore; printf 'caddy validate failed: %s\n' "$(printf '%s\n' "$out" | tail -n 2)" >&2; exit 3
  fi
  if ! out=$(reload 2>&1); then
    restore; printf 'caddy reload failed: %s\n' "$(printf '%s\n' "$out" | tail -n 2)" >&2; exit 3
  fi
  rm -f "$f.old"
}
restore() { if [ -f "$f.old" ]; then mv -f "$f.old" "$f"; else rm -f "$f"; fi; }

# systemd runs here (and not only its tools).
use_systemd() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

case "$action" in
  install)
    if ! command -v caddy >/dev/null 2>&1; then
      if command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq caddy || { apt-get update -qq && apt-get install -y -qq caddy; }
      elif command -v dnf >/dev/null 2>&1; then dnf install -y caddy
      else echo 'Caddy is not installed, and there is neither apt-get nor dnf to install it' >&2; exit 3; fi
    fi
    mkdir -p "$sites" "$(dirname "$log")" "$admin_dir"
    touch "$log"
    # The admin socket's directory: Caddy's user makes the socket there, nobody else but root enters.
    chmod 700 "$admin_dir"
    # The packaged service runs as the caddy user: it must write its log and make its socket.
    if id caddy >/dev/null 2>&1; then chown caddy:caddy "$(dirname "$log")" "$log" "$admin_dir"; fi
    caddy version
    ;;

  enable)
    # The new main Caddyfile is checked, put in place (the operator's own first kept as
    # Caddyfile.before-svc), then Caddy is reloaded, or enabled and started: systemd's unit where
    # systemd runs, else `caddy start` in a session of its own (it outlives this SSH session),
    # without the lock's descriptor (a Caddy holding it would keep every later change waiting).
    marker=$1 new="$caddyfile.svc-new"
    take_lock
    if ! out=$(caddy validate --config "$new" --adapter caddyfile 2>&1); then rm -f "$new"; tell "$out" 5; exit 1; fi
    if [ -f "$caddyfile" ] && [ ! -f "$caddyfile.before-svc" ]; then
      first=''
      IFS= read -r first < "$caddyfile" || true
      case "$first" in *"$marker"*) ;; *) cp -p "$caddyfile" "$caddyfile.before-svc" ;; esac
    fi
    mv -f "$new" "$caddyfile"
    start_log="$(dirname "$log")/svc-start.log"
    if use_systemd; then
      # Enabling is for the next boot; what counts now is that Caddy runs the new configuration.
      systemctl enable caddy >/dev/null 2>&1 || true
      # Reloaded by svc's own command: the running Caddy may still listen on the default admin address.
      if systemctl is-active --quiet caddy; then
        out=$(reload 2>&1) || { tell "$out" 5; exit 1; }
      else systemctl start caddy; fi
      echo 'caddy running (systemd)'
    elif out=$(reload 2>&1); then echo 'caddy reloaded'
    elif setsid caddy start --config "$caddyfile" --adapter caddyfile >>"$start_log" 2>&1 </dev/null 9>&-; then echo 'caddy started'
    else tell "$out" 5; tail -n 5 "$start_log" >&2; exit 1; fi
    ;;

  write-site)
    f=$1
    take_lock
    umask 022
    cat > "$f.new"
    size=0
    if [ -f "$log" ]; then size=$(wc -c < "$log"); fi
    echo "log-offset $size"
    # The same contents: nothing to load (and no reload that would disturb the others).
    if [ -f "$f" ] && cmp -s "$f.new" "$f"; then rm -f "$f.new"; echo unchanged; exit 0; fi
    rm -f "$f.old"
    if [ -f "$f" ]; then cp -p "$f" "$f.old"; fi
    mv -f "$f.new" "$f"
    load_or_restore
    echo changed
    ;;

  remove-site)
    f=$1
    take_lock
    if [ ! -f "$f" ]; then echo absent; exit 0; fi
    rm -f "$f.old"
    mv -f "$f" "$f.old"
    # When validate or reload fails, restore() puts the site back: the file stays what Caddy runs.
    load_or_restore
    echo removed
    ;;

  wait-issuance)
    # How obtaining the certificate of HOST ended, as Caddy's log tells from OFFSET on. Another
    # site's reload cancels the attempts under way, and the new configuration starts them again:
    # a cancelled attempt ("context canceled") is no answer. Lines are searched, not steps: a
    # filter that finds nothing is the answer "not yet".
    host=$1 off=$2 end=$(( $(date +%s) + $3 ))
    while :; do
      size=0
      if [ -f "$log" ]; then size=$(wc -c < "$log"); fi
      if [ "$size" -lt "$off" ]; then off=0; fi
      line=$(tail -c +$((off + 1)) "$log" 2>/dev/null | grep -F "\"identifier\":\"$host\"" \
        | grep -E '"msg":"(certificate obtained successfully|could not get certificate from issuer)"' \
        | grep -vF 'context canceled' | head -n 1 || true)
      if [ -n "$line" ]; then printf '%s\n' "$line"; exit 0; fi
      if [ "$(date +%s)" -ge "$end" ]; then echo timeout; exit 0; fi
      sleep 0.5
    done
    ;;

  reload) reload ;;

  *) echo "caddy.sh: no action \"$action\"" >&2; exit 2 ;;
esac
