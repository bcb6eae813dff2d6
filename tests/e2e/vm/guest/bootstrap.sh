#!/bin/bash
# Recording stand-in for Amazon Linux 2's /etc/eks/bootstrap.sh: one record per call with the
# unit it ran in (cgroup), then the argv one word per line; then the real script's option grammar
# (eks-nodeinit reads the options from this `case` block), which fails as the real one does on a
# flag without its value (`$2` under nounset) or on --help.
set -o nounset
{
  echo "bootstrap.sh cgroup=$(cut -d: -f3 /proc/self/cgroup | head -1) uptime=$(cut -d' ' -f1 /proc/uptime)"
  for a in "$@"; do printf 'arg %s\n' "$a"; done
} >> /var/lib/e2e/handoff.log

POSITIONAL=()
while [[ $# -gt 0 ]]; do
  key="$1"
  case $key in
    -h | --help)
      echo "usage: $0 [options] <cluster-name>"
      exit 1
      ;;
    --use-max-pods)
      VALUE="$2"
      shift
      shift
      ;;
    --b64-cluster-ca)
      VALUE="$2"
      shift
      shift
      ;;
    --apiserver-endpoint)
      VALUE="$2"
      shift
      shift
      ;;
    --kubelet-extra-args)
      VALUE="$2"
      shift
      shift
      ;;
    --enable-docker-bridge)
      VALUE="$2"
      shift
      shift
      ;;
    --aws-api-retry-attempts)
      VALUE="$2"
      shift
      shift
      ;;
    --docker-config-json)
      VALUE="$2"
      shift
      shift
      ;;
    --containerd-config-file)
      VALUE="$2"
      shift
      shift
      ;;
    --pause-container-account)
      VALUE="$2"
      shift
      shift
      ;;
    --pause-container-version)
      VALUE="$2"
      shift
      shift
      ;;
    --dns-cluster-ip)
      VALUE="$2"
      shift
      shift
      ;;
    --container-runtime)
      VALUE="$2"
      shift
      shift
      ;;
    --ip-family)
      VALUE="$2"
      shift
      shift
      ;;
    --service-ipv4-cidr)
      VALUE="$2"
      shift
      shift
      ;;
    --service-ipv6-cidr)
      VALUE="$2"
      shift
      shift
      ;;
    --enable-local-outpost)
      VALUE="$2"
      shift
      shift
      ;;
    --cluster-id)
      VALUE="$2"
      shift
      shift
      ;;
    --mount-bpf-fs)
      VALUE="$2"
      shift
      shift
      ;;
    --local-disks)
      VALUE="$2"
      shift
      shift
      ;;
    *)
      POSITIONAL+=("$1")
      shift
      ;;
  esac
done
