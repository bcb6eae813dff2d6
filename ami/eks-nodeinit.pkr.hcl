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

# A default config baked into /etc/eks-nodeinit/config.json; user data may replace it.
variable "config_path" {
  type    = string
  default = "examples/scaler.json"
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

  provisioner "file" {
    source      = var.config_path
    destination = "/tmp/eks-nodeinit-config.json"
  }

  provisioner "shell" {
    inline = [
      "set -eux",
      "if command -v dnf >/dev/null; then sudo dnf install -y /tmp/eks-nodeinit.rpm; else sudo yum install -y /tmp/eks-nodeinit.rpm; fi",
      "sudo install -d -m 0755 /etc/eks-nodeinit",
      "sudo install -m 0600 /tmp/eks-nodeinit-config.json /etc/eks-nodeinit/config.json",
      "sudo /usr/bin/eks-nodeinit validate --config /etc/eks-nodeinit/config.json",
      "sudo systemctl enable eks-nodeinit.service",
      "rm -f /tmp/eks-nodeinit.rpm /tmp/eks-nodeinit-config.json",
    ]
  }
}
