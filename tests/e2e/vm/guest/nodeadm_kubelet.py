# The config phase of the nodeadm stand-in (guest/nodeadm) for the scenario whose guest runs a
# real kubelet: the files nodeadm writes before its run phase starts containerd and the kubelet,
# written from reading nodeadm (amazon-eks-ami nodeadm/internal/kubelet/config.go,
# internal/containerd/config2.template.toml, internal/kubelet/daemon.go), not copied from it:
#
#   /etc/kubernetes/pki/ca.crt                    the cluster's CA
#   /var/lib/kubelet/kubeconfig                   the API server and the node's credentials
#   /etc/kubernetes/kubelet/config.json           nodeadm's generated kubelet config
#   /etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf   the merged `kubelet.config`
#   /etc/eks/kubelet/environment                  NODEADM_KUBELET_ARGS (kubelet.service reads it)
#   /etc/containerd/config.toml                   containerd 2's config (version 3)
#
# Differences, on purpose: the kubeconfig names a client certificate the host issued for the
# node's name (/etc/e2e/node.crt; on EKS an exec plugin gets a token for the instance role);
# the generated config is the host's (BASE_CONFIG, from the instance's type, CPUs, ID and the
# cluster's CIDR, as nodeadm derives it); no image credential provider; the runc binary is
# Debian's.

import json
import os

CA = "/etc/kubernetes/pki/ca.crt"
KUBECONFIG = "/var/lib/kubelet/kubeconfig"
CONFIG = "/etc/kubernetes/kubelet/config.json"
CONFIG_DIR = "/etc/kubernetes/kubelet/config.json.d"
ENVIRONMENT = "/etc/eks/kubelet/environment"
CONTAINERD = "/etc/containerd/config.toml"
# nodeadm's generated kubelet config for this instance, written by the host from the suite's
# model of it (tests/common/handoff_models.rs), so that one model serves the host suite and this.
BASE_CONFIG = "/etc/e2e/kubelet-config.json"


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def kubeconfig(endpoint):
    return (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster:\n"
        "    certificate-authority: %s\n    server: %s\ncurrent-context: kubelet\n"
        "contexts:\n- name: kubelet\n  context:\n    cluster: kubernetes\n    user: kubelet\n"
        "users:\n- name: kubelet\n  user:\n    client-certificate: /etc/e2e/node.crt\n"
        "    client-key: /etc/e2e/node.key\n" % (CA, endpoint))


CONTAINERD_CONFIG = """version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
address = "/run/containerd/containerd.sock"

[plugins.'io.containerd.cri.v1.images']
discard_unpacked_layers = true

[plugins."io.containerd.cri.v1.images".registry]
config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"

[plugins.'io.containerd.cri.v1.runtime'.containerd]
default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
BinaryName = "/usr/sbin/runc"
SystemdCgroup = true

[plugins.'io.containerd.cri.v1.runtime'.cni]
bin_dir = "/opt/cni/bin"
conf_dir = "/etc/cni/net.d"
"""


def configure(cluster, imds_text):
    """Write the kubelet's and containerd's files for the merged NodeConfig `cluster` (its
    cluster block, with the merged kubelet block under "kubelet")."""
    write(CA, cluster["certificateAuthority"].decode("utf-8"))
    write(KUBECONFIG, kubeconfig(cluster["apiServerEndpoint"]), 0o600)
    with open(BASE_CONFIG) as f:
        write(CONFIG, f.read())
    flags = [
        "--node-ip=" + imds_text("local-ipv4"),
        "--hostname-override=" + imds_text("local-hostname"),
        "--cloud-provider=external",
        "--runtime-cgroups=/runtime.slice/containerd.service",
        "--config=" + CONFIG,
        "--kubeconfig=" + KUBECONFIG,
    ]
    user = cluster["kubelet"]["config"]
    if user:
        doc = {"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1"}
        doc.update(user)
        write(os.path.join(CONFIG_DIR, "40-nodeadm.conf"), json.dumps(doc, indent=4))
        flags.append("--config-dir=" + CONFIG_DIR)
    flags.extend(cluster["kubelet"]["flags"])
    # systemd splits $NODEADM_KUBELET_ARGS on whitespace: a flag holding a space would split.
    write(ENVIRONMENT, "NODEADM_KUBELET_ARGS=%s\n" % " ".join(flags))
    write(CONTAINERD, CONTAINERD_CONFIG)

