# A custom EKS worker AMI with eks-nodeinit baked in, starting from the EKS-optimized AMI.
#   packer init ami/ && packer build -var family=al2023 -var kubernetes_version=1.33 ami/
#   packer build -var family=al2023 -var arch=arm64 ami/      (Graviton)
# The source AMI comes from the public SSM parameter (source-ami.pkr.hcl).

variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "kubernetes_version" {
  type    = string
  default = "1.33"
}

# "al2023" (nodeadm) or "al2" (bootstrap.sh; EKS stopped publishing AL2 AMIs in November 2025,
# so only existing versions resolve).
variable "family" {
  type    = string
  default = "al2023"
}

# "x86_64" or "arm64" (Graviton). Picks the source AMI's SSM parameter (source-ami.pkr.hcl), the
# builder's instance type and the RPM of the same architecture from `make package-all`.
variable "arch" {
  type    = string
  default = "x86_64"
}

# Empty: m6i.large for x86_64, m7g.large (Graviton3) for arm64.
variable "instance_type" {
  type    = string
  default = ""
}

# Empty: the RPM `make package-all` writes for the architecture,
# target/packages/eks-nodeinit-0.1.0-1.<x86_64|aarch64>.rpm.
variable "rpm_path" {
  type    = string
  default = ""
}

locals {
  rpm_arch      = var.arch == "arm64" ? "aarch64" : "x86_64"
  instance_type = var.instance_type != "" ? var.instance_type : (var.arch == "arm64" ? "m7g.large" : "m6i.large")
  rpm_path      = var.rpm_path != "" ? var.rpm_path : "target/packages/eks-nodeinit-0.1.0-1.${local.rpm_arch}.rpm"
}

# Optional: a config file to bake into /etc/eks-nodeinit/config.json (validated on the image).
# The unit reads the user data's config first and uses this file only when the user data holds
# none. Empty (the default): nothing is baked; the name-only user data needs no file.
variable "config_path" {
  type    = string
  default = ""
}

# Optional: images to pull into containerd's store at bake time (the CRI's namespace, as a pod
# names them: `registry.example/team/app:1.2`), recorded with their digests in
# /etc/eks-nodeinit/image-cache.json; every boot's plan checks each is still there as baked and
# says which will be pulled instead (docs/images.md). Registries that need credentials are not
# reached from here.
variable "cache_images" {
  type    = list(string)
  default = []
}

locals {
  bake_config = var.config_path != ""
  # One `--image '<ref>'` per image (a reference holds no quote: bake-images checks each).
  cache_args = join(" ", [for i in var.cache_images : "--image '${i}'"])
  al2023      = var.family == "al2023"
  # Written on the builder by the shell provisioner below (Packer 1.6.6's file provisioner takes
  # only a source file, and has no condition).
  config_b64 = local.bake_config ? base64encode(file(var.config_path)) : ""
  # nodeadm-config.service's ExecStart in the EKS AMI (amazon-eks-ami 81fec2e); the package's
  # drop-in replaces it with this command plus --config-source file:///etc/eks/nodeadm.d/.
  nodeadm_config_exec = "/usr/bin/nodeadm init --skip run --config-source imds://user-data --config-cache /run/eks/nodeadm/config.json"
}

source "amazon-ebs" "eks_node" {
  region        = var.region
  source_ami    = local.source_ami
  instance_type = local.instance_type
  ssh_username  = "ec2-user"
  ami_name      = "eks-nodeinit-${var.family}-${var.kubernetes_version}-${var.arch}-${formatdate("YYYYMMDDhhmmss", timestamp())}"

  # IMDSv2-only is set where instances are launched (the launch template: examples/terraform);
  # the builder instance's `metadata_options` block is not parsed by Packer 1.6.6, which CI uses.

  tags = {
    Name               = "eks-nodeinit ${var.family} ${var.kubernetes_version}"
    kubernetes_version = var.kubernetes_version
    source_ami         = local.source_ami
  }
}

build {
  sources = ["source.amazon-ebs.eks_node"]

  provisioner "file" {
    source      = local.rpm_path
    destination = "/tmp/eks-nodeinit.rpm"
  }

  provisioner "shell" {
    inline = [
      "set -eux",
      "if command -v dnf >/dev/null; then sudo dnf install -y /tmp/eks-nodeinit.rpm; else sudo yum install -y /tmp/eks-nodeinit.rpm; fi",
      # The unit reads its config from the user data (imds://user-data), then the baked file.
      "sudo systemctl enable eks-nodeinit.service",
      "if ${local.bake_config}; then",
      "  set +x # the config may hold the cluster CA: not traced",
      "  (umask 077 && echo '${local.config_b64}' | base64 -d > /tmp/eks-nodeinit-config.json)",
      "  set -x",
      "  sudo install -d -m 0755 /etc/eks-nodeinit",
      "  sudo install -m 0600 /tmp/eks-nodeinit-config.json /etc/eks-nodeinit/config.json",
      "  sudo /usr/bin/eks-nodeinit validate --config /etc/eks-nodeinit/config.json",
      "fi",
      # AL2023: the RPM's drop-in for nodeadm-config.service is written for the AMI's command;
      # stop the build when this AMI's command differs (the drop-in must follow it), and check
      # that systemd applies the drop-in.
      "if ${local.al2023}; then",
      "  unit=$(systemctl show -p FragmentPath --value nodeadm-config.service)",
      "  grep -qxF 'ExecStart=${local.nodeadm_config_exec}' \"$unit\" || { echo \"nodeadm-config.service's ExecStart differs from the one the eks-nodeinit drop-in replaces: update the drop-in\" >&2; exit 1; }",
      "  sudo systemctl daemon-reload",
      "  systemctl show -p ExecStart nodeadm-config.service | grep -qF 'file:///etc/eks/nodeadm.d/'",
      # Warm pools: nodeadm-run.service carries the package's hold condition.
      "  systemctl cat nodeadm-run.service | grep -qxF 'ConditionPathExists=!/run/eks-nodeinit/handoff-held'",
      "fi",
      # The image cache: containerd running with the AMI's config, each image pulled and recorded.
      "if [ -n \"${local.cache_args}\" ]; then",
      "  sudo systemctl start containerd",
      "  sudo /usr/bin/eks-nodeinit bake-images ${local.cache_args}",
      "fi",
      # The checks that read only the node, on what the next boot sets and mounts (sysctl.d,
      # the mounts, SELinux, FIPS): a failure names its cause and stops the build.
      "sudo /usr/bin/eks-nodeinit check --root /",
      "rm -f /tmp/eks-nodeinit.rpm /tmp/eks-nodeinit-config.json",
    ]
  }
}
