#!/usr/bin/env bash
# Builds the e2e guest: a Debian bookworm root with systemd, dbus, cloud-init and Debian's kernel.
# Usage: build-image.sh OUT_DIR. Writes OUT_DIR/rootfs/ (the guest's root, copied per run),
# OUT_DIR/vmlinuz and OUT_DIR/initrd.img (booted directly by QEMU; the kernel and initramfs are
# the guest's own, from linux-image-amd64). This file is the recipe: the cache key is its hash.
set -euo pipefail
out=$1
# debootstrap's mirror: E2E_DEBIAN_MIRROR, or the Debian archive this machine's apt already uses.
mirror=${E2E_DEBIAN_MIRROR:-$(bash "$(dirname "$0")/../../../.ci/apt-mirror" bookworm)}
tmp=$out.partial
rm -rf "$tmp"
mkdir -p "$tmp"
# minbase plus what a cloud node boots with. python3-cffi-backend is a dependency of
# cloud-init's dependencies that debootstrap's resolver misses. containerd is the runtime the
# private-network scenario pulls with, python3-grpcio what its CRI client (guest/e2e-cri-pull)
# speaks gRPC with; containernetworking-plugins the bridge network of the scenario that joins
# (its containerd 2 and kubelet are copied in per scenario).
# One retry: a mirror hiccup should not fail a CI run.
for attempt in 1 2; do
  rm -rf "$tmp/rootfs"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,udev,dbus,kmod,procps,iproute2,ifupdown,isc-dhcp-client,netbase,cloud-init,python3-cffi-backend,linux-image-cloud-amd64,initramfs-tools,ca-certificates,containerd,python3-grpcio,containernetworking-plugins \
    bookworm "$tmp/rootfs" "$mirror" && break
  [ "$attempt" = 2 ] && exit 1
  echo "debootstrap failed; retrying once" >&2
done
r=$tmp/rootfs
echo '/dev/vda / ext4 defaults,errors=remount-ro 0 1' > "$r/etc/fstab"
# Only the EC2 datasource: cloud-init must find the (forwarded) IMDS or fail loudly.
cat > "$r/etc/cloud/cloud.cfg.d/90-e2e.cfg" <<'CFG'
datasource_list: [ Ec2 ]
# Only C.UTF-8 exists without the locales package (cloud-init's default en_US.UTF-8 fails).
locale: C.UTF-8
# No ssh in this guest: no default user, host keys or key fingerprints (those modules fail).
users: []
ssh_genkeytypes: []
no_ssh_fingerprints: true
datasource:
  Ec2:
    metadata_urls: [ "http://169.254.169.254", "http://[fd00:ec2::254]" ]
    max_wait: 60
    timeout: 5
CFG
# containerd as on an EKS AMI: registry hosts from certs.d (config_path, as AL2's and AL2023's
# containerd config), and not started at boot: the hand-off starts it (nodeadm's run phase, or
# bootstrap.sh on AL2), after the agent has written its drop-ins.
mkdir -p "$r/etc/containerd"
cat > "$r/etc/containerd/config.toml" <<'TOML'
version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"
TOML
chroot "$r" systemctl disable containerd.service
# The guest is reached only through its serial console; no login.
chroot "$r" passwd -d root
chroot "$r" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer || true
rm -f "$r"/etc/machine-id && touch "$r/etc/machine-id"
cp -L "$r/vmlinuz" "$tmp/vmlinuz"
cp -L "$r/initrd.img" "$tmp/initrd.img"
rm -rf "$r/var/cache/apt/archives/"*.deb
rm -rf "$out"
mv "$tmp" "$out"
du -sh "$out/rootfs"
