# Launch templates and Auto Scaling groups for the two node groups of an existing EKS cluster,
# with user data rendered by templatefile + jsonencode from Terraform maps.
#
# The default form, "al2023-name-only", names only the cluster and the node group: the cluster's
# endpoint, CA and service CIDR are published once in Parameter Store under /eks/<cluster> (below)
# and the agent reads them at boot (cluster.discovery, docs/discovery.md). The AMI is one built
# with ami/ (the package's eks-nodeinit.service enabled).

variable "cluster_name" { type = string }
variable "ami_id" { type = string } # the custom AMI with eks-nodeinit baked in
variable "subnet_ids" { type = list(string) }
variable "instance_profile_arn" { type = string }
variable "node_role_name" { type = string } # the IAM role of that instance profile

# How the user data gives the agent its config:
#   al2023-name-only   MIME, one application/vnd.eks-nodeinit+json part
#                      (userdata-al2023-name-only.mime.tftpl)
#   al2-name-only      the agent's JSON config as the whole user data
#   al2023-nodeconfig  MIME, a NodeConfig with the cluster block and a script part
#                      (userdata-al2023.mime.tftpl)
#   al2-script         a script, the full cluster block in the config (userdata-al2.sh.tftpl)
# The two name-only forms are read by the packaged unit; the script forms run the agent from
# cloud-final (do not also bake a config into the AMI then: the agent would run twice).
variable "user_data_form" {
  type    = string
  default = "al2023-name-only"
  validation {
    condition     = contains(["al2023-name-only", "al2-name-only", "al2023-nodeconfig", "al2-script"], var.user_data_form)
    error_message = "user_data_form: al2023-name-only, al2-name-only, al2023-nodeconfig or al2-script."
  }
}

# Where the name-only forms look, in order: "ssmPath" (/eks/<cluster>), "describeCluster"
# (eks:DescribeCluster; an opt-in fallback, see docs/discovery.md on its throttling).
variable "discovery_sources" {
  type    = list(string)
  default = ["ssmPath"]
  validation {
    condition     = length(var.discovery_sources) > 0 && alltrue([for s in var.discovery_sources : contains(["ssmPath", "describeCluster"], s)])
    error_message = "discovery_sources: one or both of ssmPath, describeCluster."
  }
}

# A customer-managed KMS key (ARN) for the CA's SecureString; null uses the AWS managed key
# aws/ssm, whose key policy already lets the account's principals decrypt through SSM.
variable "parameter_kms_key_arn" {
  type    = string
  default = null
}

# A warm pool for the master group: instances prepared ahead (the agent holds the hand-off while
# they are Warmed:Stopped; docs/lifecycle.md) and a launch hook the agent completes once each node
# is ready. Auto Scaling has no warm pools for a group with a mixed instances policy or Spot, so
# the group then launches its first instance type from the launch template alone.
variable "master_warm_pool" {
  type    = bool
  default = false
}

locals {
  # The launch lifecycle hook every group has; the agent completes it (lifecycle.completeLaunchHook).
  launch_hook = "eks-node-ready"
}

data "aws_eks_cluster" "this" {
  name = var.cluster_name
}

locals {
  # arn:<partition>:eks:<region>:<account>:cluster/<name>
  cluster_arn = split(":", data.aws_eks_cluster.this.arn)
  partition   = local.cluster_arn[1]
  region      = local.cluster_arn[3]
  account     = local.cluster_arn[4]
  ssm_path    = "/eks/${var.cluster_name}"

  name_only = contains(["al2023-name-only", "al2-name-only"], var.user_data_form)
  warm      = { master = var.master_warm_pool, scaler = false }
  source = {
    ssmPath         = { ssmPath = { path = local.ssm_path } }
    describeCluster = { describeCluster = {} }
  }
  discovery_sources = [for s in var.discovery_sources : local.source[s]]

  # The full cluster block, for the forms that carry it in the user data.
  cluster_values = {
    apiServerEndpoint    = data.aws_eks_cluster.this.endpoint
    certificateAuthority = data.aws_eks_cluster.this.certificate_authority[0].data
    cidr                 = data.aws_eks_cluster.this.kubernetes_network_config[0].service_ipv4_cidr
  }

  sysctls = {
    "fs.inotify.max_user_watches"   = 524288
    "fs.inotify.max_user_instances" = 8192
  }
  groups = {
    master = {
      instance_types = ["m6i.large"]
      min            = 2, max = 3, desired = 2
      labels         = { "example.com/team" = "platform" }
      kubelet        = { shutdownGracePeriod = "2m", shutdownGracePeriodCriticalPods = "45s" }
      # Spreads for launch bursts; this group launches a few nodes at a time.
      tagging_spread_sec   = 0
      discovery_spread_sec = 0
    }
    scaler = {
      instance_types = ["m6i.large", "m6a.large", "m5.large"]
      min            = 0, max = 200, desired = 0
      labels         = { "node.kubernetes.io/lifecycle" = "spot" }
      kubelet        = { shutdownGracePeriod = "90s", shutdownGracePeriodCriticalPods = "30s", imageGCHighThresholdPercent = 80, imageGCLowThresholdPercent = 60 }
      # Up to 200 nodes at once: CreateTags (burst − 100) ÷ 10; Parameter Store at its default
      # 40 calls/s, 1.1 × (burst − 40) ÷ 40.
      tagging_spread_sec   = 10
      discovery_spread_sec = 4.4
    }
  }

  # The agent's config per group, as JSON.
  config = { for k, g in local.groups : k => jsonencode({
    cluster = merge(
      { name = var.cluster_name },
      local.name_only ? { discovery = { sources = local.discovery_sources, spreadSec = g.discovery_spread_sec } } : {},
      var.user_data_form == "al2-script" ? local.cluster_values : {},
    )
    nodeGroup = { name = k, role = k }
    labels    = g.labels
    sysctls   = local.sysctls
    kubelet   = g.kubelet
    tagging   = { spreadSec = g.tagging_spread_sec }
    lifecycle = { completeLaunchHook = local.launch_hook }
  }) }

  user_data = { for k, g in local.groups : k => {
    "al2023-name-only" = templatefile("${path.module}/userdata-al2023-name-only.mime.tftpl", { config = local.config[k] })
    "al2-name-only"    = local.config[k]
    "al2023-nodeconfig" = templatefile("${path.module}/userdata-al2023.mime.tftpl", {
      cluster_name     = var.cluster_name
      cluster_endpoint = local.cluster_values.apiServerEndpoint
      cluster_ca       = local.cluster_values.certificateAuthority
      service_cidr     = local.cluster_values.cidr
      config           = local.config[k]
    })
    "al2-script" = templatefile("${path.module}/userdata-al2.sh.tftpl", { config = local.config[k] })
  }[var.user_data_form] }
}

# The cluster's values, published once for every node (docs/discovery.md); the CA as a SecureString.
resource "aws_ssm_parameter" "apiserver_endpoint" {
  name  = "${local.ssm_path}/APISERVER_ENDPOINT"
  type  = "String"
  value = data.aws_eks_cluster.this.endpoint
}

resource "aws_ssm_parameter" "b64_cluster_ca" {
  name   = "${local.ssm_path}/B64_CLUSTER_CA"
  type   = "SecureString"
  key_id = var.parameter_kms_key_arn
  value  = data.aws_eks_cluster.this.certificate_authority[0].data
}

resource "aws_ssm_parameter" "service_cidr" {
  name  = "${local.ssm_path}/SERVICE_CIDR"
  type  = "String"
  value = data.aws_eks_cluster.this.kubernetes_network_config[0].service_ipv4_cidr
}

# The agent's permissions on the node role (docs/iam-policy.json), narrowed to this cluster.
data "aws_iam_policy_document" "eks_nodeinit" {
  statement {
    sid       = "EksNodeinitSetNameAndJoinedTagsOnOwnClusterInstances"
    actions   = ["ec2:CreateTags"]
    resources = ["arn:${local.partition}:ec2:${local.region}:${local.account}:instance/*"]
    condition {
      test     = "ForAllValues:StringEquals"
      variable = "aws:TagKeys"
      values   = ["Name", "eks-nodeinit/joined"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/kubernetes.io/cluster/${var.cluster_name}"
      values   = ["owned"]
    }
  }

  statement {
    sid       = "EksNodeinitReadTags"
    actions   = ["ec2:DescribeTags"]
    resources = ["*"]
  }

  # Verified join: the Node's name (PrivateDnsName) and the group's joined instances.
  statement {
    sid       = "EksNodeinitVerifiedJoinReadInstances"
    actions   = ["ec2:DescribeInstances"]
    resources = ["*"]
  }

  dynamic "statement" {
    for_each = contains(var.discovery_sources, "ssmPath") ? [1] : []
    content {
      sid     = "EksNodeinitDiscoveryParameterStore"
      actions = ["ssm:GetParametersByPath", "ssm:GetParameters"]
      resources = [
        "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${local.ssm_path}",
        "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${local.ssm_path}/*",
      ]
    }
  }

  dynamic "statement" {
    for_each = contains(var.discovery_sources, "ssmPath") && var.parameter_kms_key_arn != null ? [1] : []
    content {
      sid       = "EksNodeinitDiscoveryDecryptSecureString"
      actions   = ["kms:Decrypt"]
      resources = [var.parameter_kms_key_arn]
      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["ssm.${local.region}.amazonaws.com"]
      }
    }
  }

  dynamic "statement" {
    for_each = contains(var.discovery_sources, "describeCluster") ? [1] : []
    content {
      sid       = "EksNodeinitDiscoveryDescribeCluster"
      actions   = ["eks:DescribeCluster"]
      resources = [data.aws_eks_cluster.this.arn]
    }
  }

  # The launch hook of this cluster's groups (named with the cluster's prefix below).
  statement {
    sid       = "EksNodeinitCompleteLaunchHook"
    actions   = ["autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"]
    resources = ["arn:${local.partition}:autoscaling:${local.region}:${local.account}:autoScalingGroup:*:autoScalingGroupName/${var.cluster_name}-*"]
  }

  # Its group, when the run could not read the instance's tags.
  statement {
    sid       = "EksNodeinitLaunchHookFindGroup"
    actions   = ["autoscaling:DescribeAutoScalingInstances"]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "eks_nodeinit" {
  name   = "eks-nodeinit"
  role   = var.node_role_name
  policy = data.aws_iam_policy_document.eks_nodeinit.json
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

  user_data = base64encode(local.user_data[each.key])

  # Nodes boot once the values and the permission to read them exist.
  depends_on = [
    aws_ssm_parameter.apiserver_endpoint,
    aws_ssm_parameter.b64_cluster_ca,
    aws_ssm_parameter.service_cidr,
    aws_iam_role_policy.eks_nodeinit,
  ]
}

resource "aws_autoscaling_group" "node" {
  for_each            = local.groups
  name_prefix         = "${var.cluster_name}-${each.key}-"
  vpc_zone_identifier = var.subnet_ids
  min_size            = each.value.min
  max_size            = each.value.max
  desired_capacity    = each.value.desired

  dynamic "mixed_instances_policy" {
    for_each = local.warm[each.key] ? [] : [1]
    content {
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
  }

  # With a warm pool: the launch template alone (its instance type, on demand).
  dynamic "launch_template" {
    for_each = local.warm[each.key] ? [1] : []
    content {
      id      = aws_launch_template.node[each.key].id
      version = "$Latest"
    }
  }

  dynamic "warm_pool" {
    for_each = local.warm[each.key] ? [1] : []
    content {
      pool_state = "Stopped"
      min_size   = 1
      instance_reuse_policy { reuse_on_scale_in = true }
    }
  }

  # Each launch, into service or into the warm pool, waits until the agent reports the node
  # ready (CONTINUE); a node that never gets there is replaced after 10 minutes (ABANDON).
  initial_lifecycle_hook {
    name                 = local.launch_hook
    lifecycle_transition = "autoscaling:EC2_INSTANCE_LAUNCHING"
    default_result       = "ABANDON"
    heartbeat_timeout    = 600
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
      "k8s.io/cluster-autoscaler/enabled"                                     = "true"
      "k8s.io/cluster-autoscaler/${var.cluster_name}"                         = "owned"
      "k8s.io/cluster-autoscaler/node-template/label/node.kubernetes.io/role" = "scaler"
    } : {}
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = false
    }
  }
}
