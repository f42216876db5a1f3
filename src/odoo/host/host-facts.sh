#!/bin/sh
# The host's cores, memory (the cgroup's limit when lower) and whether systemd runs: key=value lines
# (setup_odoo sizes Odoo's workers by them; placement derives the host's capacity from its memory).
set -eu
echo "cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
mem=$(awk '/^MemTotal:/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
lim=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo max)
case "$lim" in
  "" | max | *[!0-9]*) ;;
  *) if [ "$lim" -lt "$mem" ]; then mem=$lim; fi ;;
esac
echo "memory=$mem"
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then echo systemd=yes; else echo systemd=no; fi
