//! Gathering the facts: the node's files and live values every aspect asks for (the registry's
//! `reads`), the instance (IMDS or `--metadata`), its tags and the cluster's values — each read
//! once, into one [`Facts`] value, before planning.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::aws::ec2::Ec2;
use crate::aws::Transport;
use crate::base::podcap::{self, TypeFact, TypeSource};
use crate::base::retry::RetryPolicy;
use crate::discovery::{self, ClusterFact};
use crate::facts::{Answer, Facts, FileFact, InstanceTags, Read};
use crate::instance::imds;
use crate::instance::metadata::{self, Metadata, UserData};
use crate::spec::pod_capacity::MaxPodsSpec;
use crate::spec::Spec;

mod node;
use node::NodeRead;
pub use node::OUTPUT_TIMEOUT;

/// The facts, complete, each read once: the node under `root` as the registry asks; the
/// instance, its tags and the cluster's values as [`instance`] read them; the instance type's
/// numbers when `kubelet.maxPods` needs them ([`type_fact`]).
pub async fn facts(spec: &Spec, root: &Path, instance: Instance) -> Facts {
    let node = NodeRead::of(root, spec);
    let cache = node.answers.get(&Read::File(podcap::cache::CACHE.into()));
    let cache = match cache {
        Some(Answer::File(f)) => Some(f),
        _ => None,
    };
    let type_info = type_fact(spec, &instance, cache).await;
    let Instance {
        metadata,
        tags,
        cluster,
        source,
    } = instance;
    let file = match source {
        MetadataSource::File(f) => Some(f),
        MetadataSource::Imds => None,
    };
    let imds = imds::resolve_endpoint(spec.imds.endpoint.as_deref());
    let mut facts = node.facts(Some(metadata), tags, cluster, type_info);
    facts.reach = Some(crate::facts::Reach::from_env(imds, file));
    facts
}

/// The facts of the node alone, nothing asked of the network: the cluster's values as the
/// config gives them, the instance type's numbers (when asked for) from the embedded table only.
/// For checking a config without an instance, and for tests.
pub fn node(root: &Path, spec: &Spec, instance: Option<Metadata>, tags: InstanceTags) -> Facts {
    let type_info = instance.as_ref().and_then(|m| {
        spec.kubelet.pod_capacity.max_pods?;
        Some(in_table(&m.instance_type))
    });
    let cluster = ClusterFact::from_spec(&spec.cluster);
    NodeRead::of(root, spec).facts(instance, tags, cluster, type_info)
}

/// The instance type's numbers, when `kubelet.maxPods` is set. A name no EC2 type can have is
/// refused by its grammar, before any call; else the embedded table's; for a computed max pods,
/// a type the table lacks is looked up beyond it ([`beyond_table`]). A fixed max pods needs
/// them only for a warning: never a call for that.
async fn type_fact(spec: &Spec, i: &Instance, cache: Option<&FileFact>) -> Option<TypeFact> {
    let max_pods = spec.kubelet.pod_capacity.max_pods?;
    let (md, t) = (&i.metadata, &i.metadata.instance_type);
    if !podcap::table::well_formed(t) {
        return Some(TypeFact::Unknown(format!(
            "{} is `{}`, which no EC2 instance type can be (a family of lowercase letters, digits and hyphens, a dot, a size: m6i.large): nothing was asked of EC2; correct the metadata",
            i.source.instance_type_field(),
            crate::base::text::printable(t)
        )));
    }
    Some(match (max_pods, in_table(t)) {
        (MaxPodsSpec::Computed(_), TypeFact::Unknown(why)) => {
            beyond_table(&TypeLookup::of(spec, md), t, cache, &why).await
        }
        (_, fact) => fact,
    })
}

/// How long DescribeInstanceTypes may take, retries included. Its own deadline: the type's
/// numbers are needed before anything is planned, while tagging's budget bounds a call made
/// beside the local steps.
pub const TYPE_LOOKUP_DEADLINE: Duration = Duration::from_secs(10);

/// How a type the embedded table lacks is asked of EC2 (DescribeInstanceTypes).
#[derive(Debug, Clone)]
pub struct TypeLookup {
    pub region: String,
    /// `None`: the SDK's (`AWS_ENDPOINT_URL_EC2`, else EC2's own in the region).
    pub endpoint: Option<String>,
    pub deadline: Duration,
    /// How the call reaches AWS (the config's `proxy` and `trust`).
    pub transport: Option<Transport>,
}

impl TypeLookup {
    /// For this instance: its region, the SDK's endpoint, [`TYPE_LOOKUP_DEADLINE`], the
    /// config's transport.
    pub fn of(spec: &Spec, md: &Metadata) -> TypeLookup {
        TypeLookup {
            region: md.region.clone(),
            endpoint: None,
            deadline: TYPE_LOOKUP_DEADLINE,
            transport: spec.agent_transport(&md.region),
        }
    }
}

/// A type the embedded table lacks: the cached DescribeInstanceTypes answer for it, else
/// DescribeInstanceTypes as `how` says, under the agent's retry policy; when neither answers,
/// why, and what to do.
pub async fn beyond_table(
    how: &TypeLookup,
    instance_type: &str,
    cache: Option<&FileFact>,
    not_in_table: &str,
) -> TypeFact {
    let text = cache
        .and_then(|c| c.content.as_ref().ok())
        .and_then(Option::as_deref);
    if let Some(info) = text.and_then(|x| podcap::cache::cached(x, instance_type)) {
        return TypeFact::Known {
            info,
            source: TypeSource::Cache,
        };
    }
    let deadline = tokio::time::Instant::now() + how.deadline;
    let endpoint = how.endpoint.as_deref();
    let mut ec2 = Ec2::new(&how.region, endpoint, how.transport.as_ref()).await;
    let shown = crate::base::text::printable(instance_type);
    match ec2
        .describe_instance_type(instance_type, RetryPolicy::default(), deadline)
        .await
    {
        Ok(Some(info)) => TypeFact::Known {
            info,
            source: TypeSource::Ec2,
        },
        Ok(None) => TypeFact::Unknown(format!(
            "{not_in_table}; EC2 does not know {shown} either (DescribeInstanceTypes): check the instance type"
        )),
        Err(e) => TypeFact::Unknown(format!(
            "{not_in_table}; asking EC2 failed: {e}"
        )),
    }
}

/// The instance type's numbers from the embedded table, else why not.
fn in_table(instance_type: &str) -> TypeFact {
    match podcap::table::lookup(instance_type) {
        Some(info) => TypeFact::Known {
            info,
            source: TypeSource::Table,
        },
        None => TypeFact::Unknown(format!(
            "{} is not in the embedded instance-type table ({} types)",
            crate::base::text::printable(instance_type),
            podcap::table::len()
        )),
    }
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
}

/// Where the instance's metadata was read, for a message naming one of its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataSource {
    /// A `--metadata` file.
    File(PathBuf),
    Imds,
}

impl MetadataSource {
    /// The instance type's field, as this source names it.
    fn instance_type_field(&self) -> String {
        match self {
            MetadataSource::File(p) => format!(
                "instanceType in the metadata file {}",
                crate::base::text::printable(&p.display().to_string())
            ),
            MetadataSource::Imds => format!("IMDS {}", imds::md("instance-type")),
        }
    }
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
    let (md, cluster, source) = match metadata_file {
        Some(f) => {
            let md = match read.metadata {
                Some(md) => md,
                None => metadata::load_file(f)?,
            };
            let region = md.region.clone();
            let cluster = discovery::gather(spec, root, async { Ok(region) }).await;
            (md, cluster, MetadataSource::File(f.to_path_buf()))
        }
        None => {
            let (md, cluster) = from_imds(spec, root, read.imds).await?;
            (md, cluster, MetadataSource::Imds)
        }
    };
    tracing::debug!(instance_id = %md.instance_id, region = %md.region, "instance metadata read");
    let tags = match md.tags.clone() {
        Some(t) => InstanceTags::Known(t),
        None if source == MetadataSource::Imds && spec.tagging.enabled => {
            let proxy = spec.agent_transport(&md.region);
            describe_tags(&md, spec, proxy.as_ref()).await
        }
        None => InstanceTags::Unknown,
    };
    Ok(Instance {
        metadata: md,
        tags,
        cluster,
        source,
    })
}

/// The instance's metadata from IMDS (what the config needs read with it, in one pass), beside
/// the cluster's values.
async fn from_imds(
    spec: &Spec,
    root: &Path,
    read: Option<ImdsRead>,
) -> anyhow::Result<(Metadata, ClusterFact)> {
    let endpoint = imds::resolve_endpoint(spec.imds.endpoint.as_deref());
    // The client that read the user data (with the config in it) goes on, token and all,
    // when the config names no other endpoint.
    let (client, user_data) = match read {
        Some(r) if r.client.endpoint() == endpoint => (r.client, r.user_data),
        other => (
            imds::ImdsClient::new(&endpoint, spec.imds.allow_v1_fallback)?,
            other.map_or(UserData::Unknown, |r| r.user_data),
        ),
    };
    let ask = imds::Ask {
        user_data,
        vpc_cidr_blocks: spec.proxy.is_some()
            || spec.verify.preflight != crate::config::PreflightMode::Off,
    };
    let (md, cluster) = tokio::join!(
        imds::fetch(&client, spec.imds.deadline, ask),
        discovery::gather(spec, root, imds::region(&client, spec.imds.deadline)),
    );
    Ok((md?, cluster))
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

    #[test]
    fn describe_instance_types_has_its_own_deadline_and_not_taggings_endpoint() {
        let text = r#"{"cluster":{"name":"c"},"tagging":{"ec2Endpoint":"http://127.0.0.1:9","syncBudgetMs":1}}"#;
        let c = crate::config::parse(text, "t.json").unwrap();
        let spec = crate::spec::from_config(&c).unwrap();
        let md = Metadata {
            region: "eu-west-1".into(),
            ..Metadata::default()
        };
        let how = TypeLookup::of(&spec, &md);
        assert_eq!(
            how.endpoint, None,
            "the SDK's: AWS_ENDPOINT_URL_EC2, else EC2's"
        );
        assert_eq!(how.deadline, TYPE_LOOKUP_DEADLINE);
        assert_eq!(how.region, "eu-west-1");
    }

    #[tokio::test]
    async fn an_instance_type_no_ec2_type_can_be_is_refused_naming_the_imds_path() {
        let text = r#"{"cluster":{"name":"c"},"kubelet":{"maxPods":{}}}"#;
        let c = crate::config::parse(text, "t.json").unwrap();
        let spec = crate::spec::from_config(&c).unwrap();
        let instance = Instance {
            metadata: Metadata {
                instance_type: "m6i.large\u{1b}[2J".into(),
                region: "eu-west-1".into(),
                ..Metadata::default()
            },
            tags: InstanceTags::Unknown,
            cluster: ClusterFact::from_spec(&spec.cluster),
            source: MetadataSource::Imds,
        };
        let Some(TypeFact::Unknown(why)) = type_fact(&spec, &instance, None).await else {
            panic!("a type")
        };
        let want = "IMDS /latest/meta-data/instance-type is `m6i.large\\u{1b}[2J`, which no EC2";
        assert!(why.starts_with(want), "{why}");
    }
}
