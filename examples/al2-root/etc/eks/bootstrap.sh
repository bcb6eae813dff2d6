#!/bin/bash
# Stand-in for the EKS AL2 AMI's /etc/eks/bootstrap.sh in this sample node root. It has the real
# script's option grammar (eks-nodeinit reads the options from this `case` block and checks its
# argv against them) and does no node setup: it prints the argv it was given, one word per line,
# so a real (non dry-run) demo shows exactly what the real script would receive.
set -o nounset
for a in "$@"; do printf '%s\n' "$a"; done

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
