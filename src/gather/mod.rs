//! Gathering the facts: the node's files and live values every aspect asks for (the registry's
//! `reads`, answered in [`node`]), the instance (IMDS or `--metadata`), its tags and the
//! cluster's values, and the instance type's numbers ([`instance_type`], a remote provider as
//! [`crate::discovery`] is) — each read once, into one [`Facts`] value, before planning.

use std::path::{Path, PathBuf};

use crate::aws::ec2::Ec2;
use crate::aws::Transport;
use crate::base::podcap;
use crate::base::retry::RetryPolicy;
use crate::discovery::{self, ClusterFact};
use crate::facts::{Facts, InstanceTags};
use crate::instance::imds;
use crate::instance::metadata::{self, Metadata, UserData};
use crate::spec::Spec;

pub mod instance_type;
mod node;
use node::NodeRead;
pub use node::OUTPUT_TIMEOUT;

/// The facts, complete, each read once: the node under `root` as the registry asks; the
/// instance, its tags and the cluster's values as [`instance`] read them; the instance type's
/// numbers when `kubelet.maxPods` needs them ([`instance_type`]).
pub async fn facts(spec: &Spec, root: &Path, instance: Instance) -> Facts {
    let Instance {
        metadata,
        tags,
        cluster,
        source,
        endpoints,
    } = instance;
    let file = match source {
        MetadataSource::File(f) => Some(f),
        MetadataSource::Imds => None,
    };
    let mut facts = NodeRead::of(root, spec).facts(Some(metadata), tags, cluster, None);
    if let Some(md) = &facts.instance {
        let cache = facts.file(podcap::cache::CACHE);
        let fact = instance_type::type_fact(spec, md, file.as_deref(), cache, &endpoints).await;
        facts.type_info = fact;
    }
    let imds = endpoints
        .imds
        .clone()
        .unwrap_or_else(|| imds::resolve_endpoint(spec.imds.endpoint.as_deref()));
    // The EC2 endpoint the agent's calls are given is the one its check reaches.
    let ec2 = spec.tagging.ec2_endpoint.as_deref();
    let mut reach = crate::facts::Reach::from_env(imds, file, ec2);
    reach.dual_stack = endpoints.dual_stack;
    facts.reach = Some(reach);
    facts
}

/// The facts of the node alone, nothing asked of the network: the cluster's values as the
/// config gives them, the instance type's numbers (when asked for) from the embedded table only.
/// For checking a config without an instance, and for tests.
pub fn node(root: &Path, spec: &Spec, instance: Option<Metadata>, tags: InstanceTags) -> Facts {
    let type_info = instance
        .as_ref()
        .and_then(|m| instance_type::table_only(spec, m));
    let cluster = ClusterFact::from_spec(&spec.cluster);
    NodeRead::of(root, spec).facts(instance, tags, cluster, type_info)
}

/// What was read of the instance before the config existed (the config was in the user data):
/// read again by no one.
#[derive(Default)]
pub struct Prefetched {
    /// The `--metadata` file.
    pub metadata: Option<Metadata>,
    /// The user data as read from IMDS, and the client that read it.
    pub imds: Option<ImdsRead>,
}

/// The user data as an IMDS client read it (`Absent`: the instance has none), and that client.
pub struct ImdsRead {
    pub client: imds::ImdsClient,
    pub user_data: UserData,
}

/// The instance as read: its metadata, its tags and the cluster's values, and where the
/// metadata came from.
pub struct Instance {
    pub metadata: Metadata,
    pub tags: InstanceTags,
    pub cluster: ClusterFact,
    pub source: MetadataSource,
    /// Where IMDS answered and whether the AWS calls take the dual-stack names: every AWS
    /// client of the run is given them.
    pub endpoints: crate::aws::Endpoints,
}

/// Where the instance's metadata was read, for a message naming one of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataSource {
    /// A `--metadata` file.
    File(PathBuf),
    Imds,
}

/// The instance: from `--metadata` or IMDS, and beside it the cluster's values (discovery
/// waits only for the region, and makes no call on a cache hit). With IMDS tags off and tagging
/// on, the tags (and with them the ASG's name and the current Name) come from one DescribeTags
/// under the tagging budget; when that fails they stay unknown and tagging reads them again
/// later.
pub async fn instance(
    metadata_file: Option<&Path>,
    spec: &Spec,
    root: &Path,
    read: Prefetched,
) -> anyhow::Result<Instance> {
    let (md, cluster, source, endpoints) = match metadata_file {
        Some(f) => {
            let md = match read.metadata {
                Some(md) => md,
                None => metadata::load_file(f)?,
            };
            let endpoints = crate::aws::Endpoints {
                imds: None,
                dual_stack: crate::aws::dual_stack_for(spec.dual_stack, md.private_ipv4.is_some()),
            };
            let region = (md.region.clone(), endpoints.clone());
            let cluster = discovery::gather(spec, root, async { Ok(region) }).await;
            (
                md,
                cluster,
                MetadataSource::File(f.to_path_buf()),
                endpoints,
            )
        }
        None => {
            let (md, cluster, endpoints) = from_imds(spec, root, read.imds).await?;
            (md, cluster, MetadataSource::Imds, endpoints)
        }
    };
    tracing::debug!(instance_id = %md.instance_id, region = %md.region, "instance metadata read");
    let tags = match md.tags.clone() {
        Some(t) => InstanceTags::Known(t),
        None if source == MetadataSource::Imds && spec.tagging.enabled => {
            let proxy = spec.agent_transport(&md.region, &endpoints);
            describe_tags(&md, spec, proxy.as_ref()).await
        }
        None => InstanceTags::Unknown,
    };
    Ok(Instance {
        metadata: md,
        tags,
        cluster,
        source,
        endpoints,
    })
}

/// The instance's metadata from IMDS (what the config needs read with it, in one pass), beside
/// the cluster's values.
async fn from_imds(
    spec: &Spec,
    root: &Path,
    read: Option<ImdsRead>,
) -> anyhow::Result<(Metadata, ClusterFact, crate::aws::Endpoints)> {
    let endpoints = imds::candidates(spec.imds.endpoint.as_deref());
    // The client that read the user data (with the config in it) goes on, token and all,
    // when it is at an endpoint the config allows.
    let (client, user_data) = match read {
        Some(r) if endpoints.iter().any(|e| e == r.client.endpoint()) => (r.client, r.user_data),
        other => {
            let (v1, deadline) = (spec.imds.allow_v1_fallback, spec.imds.deadline);
            let client = imds::first_answering(&endpoints, v1, deadline).await?;
            (client, other.map_or(UserData::Unknown, |r| r.user_data))
        }
    };
    // Every AWS call of this run takes the role's credentials where the instance's metadata was.
    let found = client.endpoint().trim_end_matches('/').to_string();
    let ask = imds::Ask {
        user_data,
        vpc_cidr_blocks: spec.proxy.is_some()
            || spec.verify.preflight != crate::config::CheckMode::Off,
    };
    // Discovery's calls wait for the region and, unless the config chose, whether the instance
    // has IPv4: without it, they take the dual-stack names.
    let region = async {
        let deadline = spec.imds.deadline;
        let v4 = async { spec.dual_stack.is_some() || imds::has_ipv4(&client, deadline).await };
        let (region, v4) = tokio::join!(imds::region(&client, deadline), v4);
        let endpoints = crate::aws::Endpoints {
            imds: Some(found.clone()),
            dual_stack: crate::aws::dual_stack_for(spec.dual_stack, v4),
        };
        region.map(|r| (r, endpoints))
    };
    let (md, cluster) = tokio::join!(
        imds::fetch(&client, spec.imds.deadline, ask),
        discovery::gather(spec, root, region),
    );
    let md = md?;
    let endpoints = crate::aws::Endpoints {
        imds: Some(found),
        dual_stack: crate::aws::dual_stack_for(spec.dual_stack, md.private_ipv4.is_some()),
    };
    Ok((md, cluster, endpoints))
}

async fn describe_tags(md: &Metadata, spec: &Spec, transport: Option<&Transport>) -> InstanceTags {
    let deadline = tokio::time::Instant::now() + spec.tagging.sync_budget;
    let mut ec2 = Ec2::new(&md.region, spec.tagging.ec2_endpoint.as_deref(), transport).await;
    match ec2
        .describe_tags(&md.instance_id, RetryPolicy::default(), deadline)
        .await
    {
        Ok(t) => InstanceTags::Known(t),
        Err(e) => {
            tracing::warn!("cannot read the instance's tags: {e}");
            InstanceTags::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_ec2_endpoint_the_agent_is_given_is_the_one_its_check_reaches() {
        // Before: the check's EC2 endpoint came from the environment alone, and with the
        // dual-stack names on it probed `ec2.<region>.api.aws` while the calls went to the
        // configured endpoint.
        let c = crate::config::parse(
            r#"{"cluster": {"name": "c"}, "tagging": {"ec2Endpoint": "https://vpce.example"}}"#,
            "t.json",
        )
        .unwrap();
        let spec = crate::spec::from_config(&c).unwrap();
        let root = tempfile::tempdir().unwrap();
        let instance = Instance {
            metadata: Metadata {
                instance_id: "i-1".into(),
                instance_type: "m6i.large".into(),
                region: "eu-west-1".into(),
                ..Metadata::default()
            },
            tags: InstanceTags::Unknown,
            cluster: ClusterFact::from_spec(&spec.cluster),
            source: MetadataSource::File("/md.json".into()),
            // No private IPv4: the dual-stack names, as `instance` chose them.
            endpoints: crate::aws::Endpoints {
                imds: None,
                dual_stack: crate::aws::dual_stack_for(None, false),
            },
        };
        let f = facts(&spec, root.path(), instance).await;
        let reach = f.reach.unwrap();
        assert_eq!(reach.overrides["EC2"], "https://vpce.example");
        // The facts say what the run's clients are given.
        assert_eq!(reach.dual_stack, Some(true));
    }
}
