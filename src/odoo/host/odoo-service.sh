#!/bin/sh
# One Odoo service of a host (setup_odoo, restart_odoo, stop_odoo, odoo_status; src/odoo/odoo-service-host.ts
# builds its arguments): under systemd its unit, elsewhere the supervisor script (odoo-<port>.run)
# started in a session of its own, its pid in run/odoo-<port>/pid, running while run/.../enabled exists.
#   $1 the action: state | start | start-if-stopped | restart-gracefully | stop | remove | status
#   $2 the service's name (odoo-<port>)   $3 its run directory   $4 its supervisor script
#   $5 its log   $6 its systemd unit   $7 its configuration   $8 its port
#   restart-gracefully: $9 the seconds the new Odoo has to answer, ${10} web_health.py's text
# Exit code 3 with the reason on stderr: a refusal (the port held by another program, a new Odoo that
# did not answer: the old one keeps serving).
set -eu
action=$1 service=$2 run_dir=$3 run_script=$4 log=$5 unit=$6 config=$7 port=$8
pid_file="$run_dir/pid"

# systemd runs here (and not only its tools).
use_systemd() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

# Whether the process $1 lives and is this service's supervisor. After a reboot the pid file names a
# pid the kernel may have given to another process: never "running", never signalled.
supervisor_alive() {
  [ -n "$1" ] && kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$run_script"
}

# Prints "running" when the service runs, else "stopped".
state() {
  if use_systemd; then
    if systemctl is-active --quiet "$service"; then echo running; else echo stopped; fi
    return 0
  fi
  sup=$(cat "$pid_file" 2>/dev/null || true)
  if supervisor_alive "$sup"; then echo running; else echo stopped; fi
}

# Stops the supervised process group (no systemd) and keeps it from starting again.
stop_supervised() {
  rm -f "$run_dir/enabled"
  [ -f "$pid_file" ] || return 0
  pid=$(cat "$pid_file")
  if supervisor_alive "$pid"; then
    # The supervisor leads its own process group: Odoo, its workers and its gevent process are in it.
    kill -TERM -"$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 -"$pid" 2>/dev/null && [ "$i" -lt 30 ]; do sleep 1; i=$((i + 1)); done
    kill -KILL -"$pid" 2>/dev/null || true
  fi
  rm -f "$pid_file"
}

# Starts a new supervisor (a session of its own: it outlives this SSH session, and leads its process
# group) with a new token in run/.../current; prints its pid.
spawn_supervisor() {
  tok=$(date +%s%N)
  echo "$tok" >"$run_dir/current"
  setsid /bin/sh "$run_script" "$tok" </dev/null >/dev/null 2>&1 &
  echo $!
}

port_in_use() {
  /usr/bin/python3 -c 'import socket, sys; s = socket.socket(); s.settimeout(2); sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$port"
}

# (Re)starts the service. A port held by another program is refused before anything stops (Odoo
# would fail to bind while the other program answered the health check in its place).
start() {
  if [ "$(state)" = stopped ] && port_in_use; then
    echo "Port $port on 127.0.0.1 is already in use by another program" >&2
    exit 3
  fi
  touch "$log"
  if use_systemd; then
    { systemctl daemon-reload && systemctl enable "$service" >/dev/null 2>&1 && systemctl restart "$service"; } || exit 1
    echo "restarted (systemd)"
    return 0
  fi
  stop_supervised
  mkdir -p "$run_dir"
  touch "$run_dir/enabled"
  spawn_supervisor >"$pid_file"
  echo "started (supervised, pid $(cat "$pid_file"))"
}

# Starts the service only when it should run and does not (a reboot without systemd, a crash):
# "running" when it runs, "disabled" when stop_odoo stopped it. One program: a stop on the host
# between the check and the start is not undone.
start_if_stopped() {
  if [ "$(state)" = running ]; then echo running; return 0; fi
  if use_systemd; then
    systemctl is-enabled --quiet "$service" || { echo disabled; return 0; }
  elif [ ! -f "$run_dir/enabled" ]; then
    echo disabled
    return 0
  fi
  start
}

# Restarts a running service without refusing a request (supervised): a new supervisor starts Odoo
# with the code on disk now, on the same port (SO_REUSEPORT: launcher.py); once a process of it
# listens and /web/health answers, the old Odoo gets SIGINT (Odoo's graceful stop: its workers finish
# the requests in flight) and connections still queued on its socket move to the new one
# (net.ipv4.tcp_migrate_req). A new one that does not answer is stopped and the old one keeps serving
# (exit code 3). Under systemd: SIGHUP to the main process (Odoo re-executes itself in place; its
# socket is closed meanwhile). Nothing running: an ordinary start.
restart_gracefully() {
  seconds=$1 web_health=$2
  if use_systemd; then
    if systemctl is-active --quiet "$service"; then
      systemctl kill -s HUP --kill-whom=main "$service" || exit 1
      echo "signalled (systemd, SIGHUP)"
      return 0
    fi
    systemctl restart "$service" || exit 1
    echo "restarted (systemd)"
    return 0
  fi
  old=$(cat "$pid_file" 2>/dev/null || true)
  if ! supervisor_alive "$old"; then start; return 0; fi
  sysctl -qw net.ipv4.tcp_migrate_req=1 2>/dev/null || true
  oldtok=$(cat "$run_dir/current" 2>/dev/null || true)
  touch "$run_dir/enabled" "$log"
  new=$(spawn_supervisor)
  if ! /usr/bin/python3 -c "$web_health" "$port" "$seconds" "$new"; then
    printf '%s\n' "$oldtok" >"$run_dir/current"
    kill -INT -"$new" 2>/dev/null || true
    sleep 2
    kill -KILL -"$new" 2>/dev/null || true
    tail -n 20 "$log" >&2
    exit 3
  fi
  echo "$new" >"$pid_file"
  # The old supervisor's Odoo (its child: setpriv and env exec into it) stops gracefully; the
  # supervisor, no longer current, does not start it again.
  for child in $(pgrep -P "$old" || true); do kill -INT "$child" 2>/dev/null || true; done
  i=0
  while kill -0 -"$old" 2>/dev/null && [ "$i" -lt 120 ]; do sleep 0.5; i=$((i + 1)); done
  kill -KILL -"$old" 2>/dev/null || true
  echo "restarted gracefully (supervised, pid $new; the old pid $old stopped)"
}

# Stops the service (and keeps it from starting again: disabled, or the supervisor's flag removed).
stop() {
  if use_systemd; then
    systemctl disable --now "$service" >/dev/null 2>&1 || systemctl stop "$service"
  else
    stop_supervised
  fi
  echo stopped
}

# Stops the service and removes its files (its configuration holds the database password).
remove() {
  if use_systemd; then
    systemctl disable --now "$service" >/dev/null 2>&1 || true
    rm -f "$unit"
    systemctl daemon-reload
  else
    stop_supervised
  fi
  rm -f "$config" "$run_script"
  echo "$service removed"
}

# What odoo_status reads of the service: whether it runs, and its workers (only that line of the
# configuration: the file holds the database password).
status() {
  echo "service=$(state)"
  echo "workers=$(sed -n 's/^workers = \([0-9]*\)$/\1/p' "$config")"
}

case "$action" in
  state) state ;;
  start) start ;;
  start-if-stopped) start_if_stopped ;;
  restart-gracefully) restart_gracefully "$9" "${10}" ;;
  stop) stop ;;
  remove) remove ;;
  status) status ;;
  *) echo "unknown action $action" >&2; exit 2 ;;
esac
