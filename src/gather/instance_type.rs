//! The instance type's numbers, a remote fact: refused by its grammar before any call, else the
//! embedded table's, else (for a computed max pods) the node's cache of an earlier answer or
//! DescribeInstanceTypes under its own deadline. A provider of its own, as
//! [`crate::discovery`] is for the cluster's values: gathering asks it once, with what the node
//! read (the cache file).

use std::path::Path;
use std::time::Duration;

use crate::aws::ec2::Ec2;
use crate::aws::Transport;
use crate::base::podcap::{self, TypeFact, TypeSource};
use crate::base::retry::RetryPolicy;
use crate::facts::FileFact;
use crate::instance::imds;
use crate::instance::metadata::Metadata;
use crate::spec::pod_capacity::MaxPodsSpec;
use crate::spec::Spec;

/// The instance type's numbers, when `kubelet.maxPods` is set. A name no EC2 type can have is
/// refused by its grammar, before any call; else the embedded table's; for a computed max pods,
/// a type the table lacks is looked up beyond it ([`beyond_table`]). A fixed max pods needs
/// them only for a warning: never a call for that.
pub(super) async fn type_fact(
    spec: &Spec,
    md: &Metadata,
    metadata_file: Option<&Path>,
    cache: Option<&FileFact>,
    endpoints: &crate::aws::Endpoints,
) -> Option<TypeFact> {
    let max_pods = spec.kubelet.pod_capacity.max_pods?;
    let t = &md.instance_type;
    if !podcap::table::well_formed(t) {
        return Some(TypeFact::Unknown(format!(
            "{} is `{}`, which no EC2 instance type can be (a family of lowercase letters, digits and hyphens, a dot, a size: m6i.large): nothing was asked of EC2; correct the metadata",
            instance_type_field(metadata_file),
            crate::base::text::printable(t)
        )));
    }
    Some(match (max_pods, in_table(t)) {
        (MaxPodsSpec::Computed(_), TypeFact::Unknown(why)) => {
            beyond_table(&TypeLookup::of(spec, md, endpoints), t, cache, &why).await
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
    pub fn of(spec: &Spec, md: &Metadata, endpoints: &crate::aws::Endpoints) -> TypeLookup {
        TypeLookup {
            region: md.region.clone(),
            endpoint: None,
            deadline: TYPE_LOOKUP_DEADLINE,
            transport: spec.agent_transport(&md.region, endpoints),
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

/// The instance type's numbers from the embedded table alone, when `kubelet.maxPods` is set:
/// nothing asked of the network (checking a config, tests).
pub(super) fn table_only(spec: &Spec, md: &Metadata) -> Option<TypeFact> {
    spec.kubelet.pod_capacity.max_pods?;
    Some(in_table(&md.instance_type))
}

/// The instance type's field, as the metadata's source names it: the `--metadata` file's, else
/// IMDS's.
fn instance_type_field(metadata_file: Option<&Path>) -> String {
    match metadata_file {
        Some(p) => format!(
            "instanceType in the metadata file {}",
            crate::base::text::printable(&p.display().to_string())
        ),
        None => format!("IMDS {}", imds::md("instance-type")),
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
        let how = TypeLookup::of(&spec, &md, &crate::aws::Endpoints::default());
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
        let md = Metadata {
            instance_type: "m6i.large\u{1b}[2J".into(),
            region: "eu-west-1".into(),
            ..Metadata::default()
        };
        let Some(TypeFact::Unknown(why)) =
            type_fact(&spec, &md, None, None, &Default::default()).await
        else {
            panic!("a type")
        };
        let want = "IMDS /latest/meta-data/instance-type is `m6i.large\\u{1b}[2J`, which no EC2";
        assert!(why.starts_with(want), "{why}");
    }
}
