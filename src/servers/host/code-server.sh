#!/bin/sh
# code-server on a root server, as the login user (or root under sudo): src/servers/root-server-jobs.ts.
#   $1 the action:
#      find          prints where code-server is installed; fails when it is not
#      write-config  its config (0600) from stdin: the password never appears on a command line
#      start         (re)starts it as a service and checks it still runs two seconds later
#      remove        stops and uninstalls it (package or standalone) and removes its config (it holds the password)
set -eu
state_dir="$HOME/.local/state/svc-code-server"
config_dir="$HOME/.config/code-server"

# The binary: on PATH (deb/rpm install) or the standalone install in ~/.local/bin; "" when none.
find_binary() {
  CS=$(command -v code-server || true)
  if [ -z "$CS" ] && [ -x "$HOME/.local/bin/code-server" ]; then CS="$HOME/.local/bin/code-server"; fi
}

# systemd when it runs and we are root (the install script's `systemctl enable --now code-server@$USER`);
# else a background process.
use_systemd() { [ "$(id -u)" = 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

require_binary() {
  find_binary
  if [ -z "$CS" ]; then echo 'code-server is not installed' >&2; exit 1; fi
}

case "$1" in
  find)
    require_binary
    echo "$CS"
    ;;

  write-config)
    umask 077
    mkdir -p "$config_dir"
    cat > "$config_dir/config.yaml"
    ;;

  start)
    require_binary
    echo "$CS"
    if use_systemd; then
      unit="code-server@$(id -un)"
      systemctl enable "$unit"
      systemctl restart "$unit"
      sleep 2
      systemctl is-active "$unit"
    else
      mkdir -p "$state_dir"
      # The one started last time, if any: it may have ended meanwhile.
      if [ -f "$state_dir/pid" ]; then kill "$(cat "$state_dir/pid")" 2>/dev/null || true; fi
      nohup "$CS" --config "$config_dir/config.yaml" > "$state_dir/log" 2>&1 < /dev/null &
      echo $! > "$state_dir/pid"
      sleep 2
      if ! kill -0 "$(cat "$state_dir/pid")"; then
        echo 'code-server exited:' >&2
        tail -n 20 "$state_dir/log" >&2
        exit 1
      fi
      echo "running as pid $(cat "$state_dir/pid")"
    fi
    ;;

  remove)
    # Stopped first, each way it may run; one not running is what is wanted.
    if use_systemd; then systemctl disable --now "code-server@$(id -un)" 2>/dev/null || true; fi
    if [ -f "$state_dir/pid" ]; then
      kill "$(cat "$state_dir/pid")" 2>/dev/null || true
      rm -f "$state_dir/pid"
    fi
    if command -v dpkg >/dev/null 2>&1 && dpkg -s code-server >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get remove -y code-server
    fi
    if command -v rpm >/dev/null 2>&1 && rpm -q code-server >/dev/null 2>&1; then rpm -e code-server; fi
    rm -rf "$HOME"/.local/lib/code-server-* "$HOME/.local/bin/code-server"
    rm -f "$config_dir/config.yaml"
    find_binary
    if [ -n "$CS" ]; then echo "code-server is still installed at $CS" >&2; exit 1; fi
    echo removed
    ;;

  *) echo "code-server.sh: no action \"$1\"" >&2; exit 2 ;;
esac
