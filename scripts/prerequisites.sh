#!/usr/bin/env bash
# What the tests and benches drive besides Node (run by `npm test` and the `bench:*` scripts):
# PostgreSQL and Redis to talk to, and the programs the tests start themselves: OpenSSH's sshd
# (a real SSH server per test file), sudo (sudo tests), Chromium (the trial pages in a browser),
# git (a real git host for deploys), python3 (deploy validation on the "server"; passlib to check
# Odoo password hashes), openssl (TLS),
# pg_dump/pg_restore (the tests' backup server dumps and restores real databases), Caddy and
# Pebble with pebble-challtestsrv (customer domains: the service runs Caddy on the Odoo host, Pebble
# is the ACME server and challtestsrv the DNS server of the tests).
# As root with apt (a fresh Debian machine, CI) missing packages are installed and stopped
# services started with the machine's own commands; otherwise it stops at once and says how.
set -euo pipefail

host=127.0.0.1; pg_port=5432; redis_port=6379

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v sudo >/dev/null 2>&1 || missing+=(sudo)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# Debian's passlib (for /usr/bin/python3): the tests check Odoo password hashes the way Odoo does.
/usr/bin/python3 -c 'import passlib' >/dev/null 2>&1 || missing+=(python3-passlib)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
{ command -v pg_isready && command -v pg_dump; } >/dev/null 2>&1 || missing+=(postgresql-client)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
{ command -v pebble && command -v pebble-challtestsrv; } >/dev/null 2>&1 || missing+=(pebble)

can_install=false
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then can_install=true; fi

if [ ${#missing[@]} -gt 0 ]; then
  if $can_install; then
    echo "Installing what the tests drive: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    # The package starts its own Caddy where systemd runs; the tests start theirs on 80 and 443.
    if [[ " ${missing[*]} " == *" caddy "* ]] && [ -d /run/systemd/system ]; then systemctl disable --now caddy >/dev/null 2>&1 || true; fi
  else
    echo "The tests need: ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

pg_up() { pg_isready -h "$host" -p "$pg_port" -q; }
redis_up() { redis-cli -h "$host" -p "$redis_port" ping >/dev/null 2>&1; }

if ! pg_up && $can_install && command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
fi
if ! redis_up && $can_install && command -v redis-server >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$redis_port" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
for _ in $(seq 1 30); do pg_up && redis_up && break; sleep 1; done

if ! pg_up; then
  echo "PostgreSQL does not answer on $host:$pg_port (the tests use it with trust auth as user postgres)." >&2
  echo "  Start it, e.g.: docker compose up -d postgres" >&2
  exit 1
fi
if ! redis_up; then
  echo "Redis does not answer on $host:$redis_port." >&2
  echo "  Start it, e.g.: docker compose up -d redis" >&2
  exit 1
fi
