#!/bin/bash
# Recording stand-in for Amazon Linux 2's /etc/eks/bootstrap.sh: one record per call with the
# unit it ran in (cgroup), then the argv one word per line.
{
  echo "bootstrap.sh cgroup=$(cut -d: -f3 /proc/self/cgroup | head -1) uptime=$(cut -d' ' -f1 /proc/uptime)"
  for a in "$@"; do printf 'arg %s\n' "$a"; done
} >> /var/lib/e2e/handoff.log
