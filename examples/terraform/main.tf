# Launch templates and Auto Scaling groups for the two node groups, with user data rendered by
# templatefile + jsonencode from Terraform maps. Amazon Linux 2023 (nodeadm) form; for AL2 use
# userdata-al2.sh.tftpl instead.

variable "cluster_name" { type = string }
variable "cluster_endpoint" { type = string }
variable "cluster_ca" { type = string }          # base64, as aws_eks_cluster.x.certificate_authority[0].data
variable "service_cidr" { type = string }
variable "ami_id" { type = string }              # the custom AMI with eks-nodeinit baked in
variable "subnet_ids" { type = list(string) }
variable "instance_profile_arn" { type = string }

locals {
  sysctls = {
    "fs.inotify.max_user_watches"   = 524288
    "fs.inotify.max_user_instances" = 8192
  }
  groups = {
    master = {
      instance_types = ["m6i.large"]
      min = 2, max = 3, desired = 2
      labels  = { "example.com/team" = "platform" }
      kubelet = { shutdownGracePeriod = "2m", shutdownGracePeriodCriticalPods = "45s" }
    }
    scaler = {
      instance_types = ["m6i.large", "m6a.large", "m5.large"]
      min = 0, max = 200, desired = 0
      labels  = { "node.kubernetes.io/lifecycle" = "spot" }
      kubelet = { shutdownGracePeriod = "90s", shutdownGracePeriodCriticalPods = "30s", imageGCHighThresholdPercent = 80, imageGCLowThresholdPercent = 60 }
    }
  }
}

resource "aws_launch_template" "node" {
  for_each      = local.groups
  name_prefix   = "${var.cluster_name}-${each.key}-"
  image_id      = var.ami_id
  instance_type = each.value.instance_types[0]

  iam_instance_profile { arn = var.instance_profile_arn }

  metadata_options {
    http_tokens                 = "required" # IMDSv2 only
    http_put_response_hop_limit = 1
    # Instance-metadata tags cannot be enabled on instances carrying tag keys with "/"
    # (kubernetes.io/cluster/<name>): the agent reads tags with DescribeTags instead.
    instance_metadata_tags = "disabled"
  }

  user_data = base64encode(templatefile("${path.module}/userdata-al2023.mime.tftpl", {
    cluster_name     = var.cluster_name
    cluster_endpoint = var.cluster_endpoint
    cluster_ca       = var.cluster_ca
    service_cidr     = var.service_cidr
    config = jsonencode({
      cluster   = { name = var.cluster_name }
      nodeGroup = { name = each.key, role = each.key }
      labels    = each.value.labels
      sysctls   = local.sysctls
      kubelet   = each.value.kubelet
      # (burst − 100) ÷ 10: the scaler group grows by up to 200 nodes at once.
      tagging   = { spreadSec = each.key == "scaler" ? 10 : 0 }
    })
  }))
}

resource "aws_autoscaling_group" "node" {
  for_each            = local.groups
  name_prefix         = "${var.cluster_name}-${each.key}-"
  vpc_zone_identifier = var.subnet_ids
  min_size            = each.value.min
  max_size            = each.value.max
  desired_capacity    = each.value.desired

  mixed_instances_policy {
    instances_distribution {
      on_demand_percentage_above_base_capacity = each.key == "scaler" ? 0 : 100
      spot_allocation_strategy                 = "price-capacity-optimized"
    }
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.node[each.key].id
        version            = "$Latest"
      }
      dynamic "override" {
        for_each = each.value.instance_types
        content { instance_type = override.value }
      }
    }
  }

  # A self-managed node without this tag does not join the cluster.
  tag {
    key                 = "kubernetes.io/cluster/${var.cluster_name}"
    value               = "owned"
    propagate_at_launch = true
  }
  # cluster-autoscaler auto-discovery (scaler only; the master group is fixed size).
  dynamic "tag" {
    for_each = each.key == "scaler" ? {
      "k8s.io/cluster-autoscaler/enabled"             = "true"
      "k8s.io/cluster-autoscaler/${var.cluster_name}" = "owned"
      "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/role" = "scaler"
    } : {}
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = false
    }
  }
}
