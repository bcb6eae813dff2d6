#!/bin/bash
# The user-data script eks-nodeinit replaces, as EKS teams usually write it: curl for IMDSv2,
# the AWS CLI for the Name tag, sysctl, sed on the kubelet JSON, a logind drop-in, then
# bootstrap.sh. Used by `cargo bench --bench startup` (benches/startup.rs) as the side-by-side baseline; paths are
# under $ROOT so it can run on a sample node root.
set -euo pipefail
ROOT=${ROOT:-}
IMDS=${IMDS:-http://169.254.169.254}
GROUP=${GROUP:-scaler}
EC2_ENDPOINT=${EC2_ENDPOINT:-}

TOKEN=$(curl -sf -X PUT "$IMDS/latest/api/token" -H "X-aws-ec2-metadata-token-ttl-seconds: 21600")
md() { curl -sf -H "X-aws-ec2-metadata-token: $TOKEN" "$IMDS/latest/meta-data/$1"; }
INSTANCE_ID=$(md instance-id)
IP=$(md local-ipv4)
REGION=$(md placement/region)
AZ=$(md placement/availability-zone)
TYPE=$(md instance-type)
echo "instance $INSTANCE_ID ($TYPE) in $AZ"

NAME="$GROUP-${IP//./x}"
aws ec2 create-tags ${EC2_ENDPOINT:+--endpoint-url "$EC2_ENDPOINT"} --region "$REGION" \
  --resources "$INSTANCE_ID" --tags "Key=Name,Value=$NAME"

for kv in fs.inotify.max_user_watches=524288 fs.inotify.max_user_instances=8192 vm.max_map_count=262144; do
  key=${kv%%=*}; val=${kv#*=}
  echo "$val" > "$ROOT/proc/sys/${key//.//}"
  echo "$key = $val" >> "$ROOT/etc/sysctl.d/99-custom.conf"
done

KUBELET_CONFIG=$ROOT/etc/kubernetes/kubelet/kubelet-config.json
sed -i 's/^}$/  ,"imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 60, "shutdownGracePeriod": "90s", "shutdownGracePeriodCriticalPods": "30s"\n}/' "$KUBELET_CONFIG"

mkdir -p "$ROOT/etc/systemd/logind.conf.d"
printf '[Login]\nInhibitDelayMaxSec=90\n' > "$ROOT/etc/systemd/logind.conf.d/99-shutdown.conf"

exec "$ROOT/etc/eks/bootstrap.sh" prod-eu --container-runtime containerd \
  --kubelet-extra-args '--node-labels=node.kubernetes.io/role=scaler,node.kubernetes.io/lifecycle=spot'
