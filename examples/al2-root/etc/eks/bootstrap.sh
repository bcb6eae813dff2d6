#!/bin/sh
# Stand-in for the EKS AL2 AMI's /etc/eks/bootstrap.sh in this sample node root: it only
# prints the argv it was given, one word per line, so a real (non dry-run) demo shows exactly
# what the real script would receive.
for a in "$@"; do printf '%s\n' "$a"; done
