#!/usr/bin/env bash
# What the tests and benches drive besides Node (run by `npm test` and the `bench:*` scripts):
# PostgreSQL and Redis to talk to, and the programs the tests start themselves: OpenSSH's sshd
# (a real SSH server per test file), sudo (sudo tests), Chromium (the trial pages in a browser),
# git (a real git host for deploys), python3 (deploy validation on the "server"; passlib to check
# Odoo password hashes), openssl (TLS), shellcheck and pylint (the linter of the host programs),
# pg_dump/pg_restore (the tests' backup server dumps and restores real databases), restic (the
# backup server's repositories: local, SFTP through the tests' sshd, S3 through a loopback stand-in), Caddy and
# Pebble with pebble-challtestsrv (customer domains: the service runs Caddy on the Odoo host, Pebble
# is the ACME server and challtestsrv the DNS server of the tests), redis-server (a private Redis the
# tests kill and restart), redis-sentinel and haproxy (the high-availability tests) and
# PostgreSQL's server programs (initdb, pg_ctl and pg_basebackup run as the postgres user: a private
# TLS cluster, a primary and its streaming replica), whatever runs the PostgreSQL and Redis the service uses.
# As root with apt (a fresh Debian machine, CI) missing packages are installed and stopped
# services started with the machine's own commands; otherwise it stops at once and says how.
# The machine's host name must resolve: sudo says "unable to resolve host" on every command
# otherwise (on stderr, which tests compare); as root it is added to /etc/hosts.
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
command -v restic >/dev/null 2>&1 || missing+=(restic)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
{ command -v pebble && command -v pebble-challtestsrv; } >/dev/null 2>&1 || missing+=(pebble)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The linters of svc's shell and Python programs (scripts/lint-host.sh, part of `npm run lint`).
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v pylint >/dev/null 2>&1 || missing+=(pylint)
# High availability (test/ha-*.test.ts, bench:ha): three sentinels watching private Redis servers,
# HAProxy in front of a private PostgreSQL primary and its streaming replica (pg_basebackup).
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
# The server programs of any version (Debian 12's postgresql is 15) and the user they run as.
{ compgen -G '/usr/lib/postgresql/*/bin/initdb' && compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' && id -u postgres; } >/dev/null 2>&1 ||
  missing+=(postgresql)

can_install=false
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then can_install=true; fi

installing() { [[ " ${missing[*]} " == *" $1 "* ]]; }

# The packages of caddy, redis-server and postgresql start their service on install (80/443, 6379,
# 5432): the tests start their own, and the PostgreSQL and Redis the service uses may be elsewhere
# (docker compose) or already running on those ports. redis-sentinel and haproxy would start theirs
# too (26379, and whatever haproxy.cfg binds): the tests run their own on free ports. While apt
# runs, policy-rc.d answers 101 (no service may start); the one there before, if any, is put back.
policy=/usr/sbin/policy-rc.d
policy_saved=""
hold_services() {
  if [ -e "$policy" ]; then
    policy_saved=$(mktemp)
    cp -p "$policy" "$policy_saved"
  fi
  trap release_services EXIT
  trap 'release_services; exit 130' INT TERM
  printf '#!/bin/sh\n# scripts/prerequisites.sh: no service starts while it installs packages\nexit 101\n' >"$policy"
  chmod 755 "$policy"
}
release_services() {
  if [ -n "$policy_saved" ]; then mv "$policy_saved" "$policy"; else rm -f "$policy"; fi
  policy_saved=""
  trap - EXIT INT TERM
}
# PostgreSQL clusters as "<version>/<name>" lines.
clusters() { if command -v pg_lsclusters >/dev/null 2>&1; then pg_lsclusters -h | awk '{print $1 "/" $2}'; fi; }

if [ ${#missing[@]} -gt 0 ]; then
  if $can_install; then
    echo "Installing what the tests drive: ${missing[*]}"
    apt-get update -qq
    clusters_before=$(clusters)
    hold_services
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    release_services
    # Where systemd runs, the services would start at the next boot: not wanted either.
    if [ -d /run/systemd/system ]; then
      for unit in caddy redis-server redis-sentinel haproxy postgresql; do
        if installing "$unit"; then systemctl disable --now "$unit" >/dev/null 2>&1 || true; fi
      done
    fi
    # The package made a cluster (never started) that nothing uses: without it, no later run
    # starts it below in place of the PostgreSQL the tests use. Clusters there before are kept.
    if installing postgresql; then
      for made in $(clusters); do
        if ! grep -qxF "$made" <<<"$clusters_before"; then pg_dropcluster "${made%%/*}" "${made#*/}" || true; fi
      done
    fi
  else
    echo "The tests need: ${missing[*]}. Install them with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# sudo resolves the host name on every command and complains on stderr when it cannot.
me=$(uname -n)
if ! getent hosts "$me" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && { [ -w /etc/hosts ] || [ ! -e /etc/hosts ]; }; then
    echo "The host name $me does not resolve (sudo would say so on every command): adding it to /etc/hosts"
    printf '127.0.1.1\t%s\n' "$me" >>/etc/hosts
  else
    echo "The host name $me does not resolve (sudo says so on every command). Add it with:" >&2
    echo "  echo '127.0.1.1 $me' | sudo tee -a /etc/hosts" >&2
  fi
fi

pg_up() { pg_isready -h "$host" -p "$pg_port" -q; }
redis_up() { redis-cli -h "$host" -p "$redis_port" ping >/dev/null 2>&1; }

if ! pg_up && $can_install && command -v pg_ctlcluster >/dev/null 2>&1; then
  pg_ctlcluster --skip-systemctl-redirect "$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | head -n 1)" main start || true
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
