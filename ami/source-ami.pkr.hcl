# Plugin requirements and the source AMI lookup. Needs Packer >= 1.7 (data sources); see
# ami/README.md for how CI validates with Debian's Packer 1.6.6, which cannot parse this file.

packer {
  required_plugins {
    amazon = {
      version = ">= 1.3.0"
      source  = "github.com/hashicorp/amazon"
    }
  }
}

locals {
  ssm_parameter = var.family == "al2023" ? "/aws/service/eks/optimized-ami/${var.kubernetes_version}/amazon-linux-2023/${var.arch}/standard/recommended/image_id" : "/aws/service/eks/optimized-ami/${var.kubernetes_version}/amazon-linux-2${var.arch == "arm64" ? "-arm64" : ""}/recommended/image_id"
  source_ami    = data.amazon-parameterstore.eks_ami.value
}

data "amazon-parameterstore" "eks_ami" {
  name   = local.ssm_parameter
  region = var.region
}
