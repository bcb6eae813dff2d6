//! The instance's `Name` tag: `<node group>-<IPv4 with dots as x>`, set with CreateTags only
//! when it differs. The OS hostname is left alone (EKS names the node from it).

use crate::facts::{Family, TagState};
use crate::instance::metadata::Metadata;
use crate::plan::step::{Step, TagHow};
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "name-tag",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

/// The tag the agent sets.
pub(crate) const KEY: &str = "Name";
/// EC2's limit on a tag value.
pub(crate) const TAG_VALUE_MAX: usize = 256;

fn reads(_: &Spec, _: Option<Family>, _: &mut Reads) {}

/// The Name tag value: `<group>-<IPv4 with dots as x>` (IPv6-only: colons as x); `group` is
/// `nodeGroup.name`, else the instance's Auto Scaling group ([`crate::facts::Facts::autoscaling_group`]).
pub fn value(group: Option<&str>, md: &Metadata) -> Result<String, String> {
    let group = group.ok_or_else(|| {
            "no node group name: set nodeGroup.name, or turn on instance-metadata tags so the ASG name (aws:autoscaling:groupName) is visible".to_string()
        })?;
    let ip = match (&md.private_ipv4, &md.ipv6) {
        (Some(v4), _) => v4.replace('.', "x"),
        (None, Some(v6)) => v6.replace(':', "x"),
        (None, None) => {
            return Err(
                "the instance has neither a private IPv4 nor an IPv6 address in its metadata"
                    .into(),
            )
        }
    };
    let value = format!("{group}-{ip}");
    if value.len() > TAG_VALUE_MAX {
        return Err(format!(
            "Name tag `{}` is {} characters; EC2 allows at most {TAG_VALUE_MAX}: shorten nodeGroup.name",
            crate::base::text::printable(&value),
            value.len()
        ));
    }
    if value.to_ascii_lowercase().starts_with("aws:") {
        return Err("tag values may not start with `aws:`".into());
    }
    Ok(value)
}

fn plan(i: &Input, out: &mut Out) {
    let (spec, facts) = (i.spec, i.facts);
    let Some(md) = &facts.instance else {
        return; // checking a config without an instance: nothing to tag
    };
    if spec.name_tag.enabled {
        let group = spec
            .name_tag
            .group
            .as_deref()
            .or_else(|| facts.autoscaling_group());
        match value(group, md) {
            Ok(value) => match facts.tags.get(KEY) {
                TagState::Is(cur) if cur == value => {
                    // No step, but the report says so.
                    let record = crate::aws::ec2::TaggingRecord::already_set(KEY.into(), value);
                    let record = serde_json::to_value(record).unwrap_or_default();
                    out.record.insert("tagging".into(), record);
                }
                current => out.steps.push(Step::Tag {
                    instance_id: md.instance_id.clone(),
                    key: KEY.into(),
                    value,
                    current,
                    how: TagHow {
                        region: md.region.clone(),
                        known: facts.tags.clone(),
                        policy: spec.tagging.clone(),
                        transport: spec
                            .agent_transport(&md.region, &facts.endpoints())
                            .map(Box::new),
                    },
                }),
            },
            Err(e) => out.findings.push("nodeGroup.name", e),
        }
    }
    // The cluster tag is read with the other tags; without it a self-managed node never joins.
    let key = format!("kubernetes.io/cluster/{}", spec.cluster.name);
    if matches!(facts.tags.get(&key), TagState::Absent) {
        out.warnings.push(format!(
            "the instance has no `{key}` tag: a self-managed node without it does not join; have the Auto Scaling group propagate it at launch"
        ));
    }
}

/// Whether a run that applies its plan will likely call EC2 to tag: tagging on and the Name tag
/// unknown or absent (when it is set, the plan tags only if its value changed; then the client
/// is made then).
pub fn likely(spec: &crate::spec::tagging::TaggingSpec, tags: &crate::facts::InstanceTags) -> bool {
    spec.enabled && !matches!(tags.get(KEY), TagState::Is(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Facts;

    fn md() -> Metadata {
        Metadata {
            instance_id: "i-1".into(),
            private_ipv4: Some("10.0.12.34".into()),
            instance_type: "m6i.large".into(),
            region: "us-east-1".into(),
            availability_zone: "us-east-1a".into(),
            autoscaling_group_name: Some("asg-a".into()),
            ..Default::default()
        }
    }

    #[test]
    fn name_from_group_or_asg() {
        assert_eq!(value(Some("scaler"), &md()).unwrap(), "scaler-10x0x12x34");
        let facts = Facts::builder(Family::Al2).instance(md()).build();
        let asg = facts.autoscaling_group();
        assert_eq!(value(asg, &md()).unwrap(), "asg-a-10x0x12x34");
        let mut m = md();
        m.autoscaling_group_name = None;
        let facts = Facts::builder(Family::Al2).instance(m.clone()).build();
        let asg = facts.autoscaling_group();
        assert!(value(asg, &m).unwrap_err().contains("nodeGroup.name"));
    }

    #[test]
    fn ipv6_only_uses_x_for_colons() {
        let mut m = md();
        m.private_ipv4 = None;
        m.ipv6 = Some("2600:1f18::1".into());
        assert_eq!(value(Some("g"), &m).unwrap(), "g-2600x1f18xx1");
    }

    #[test]
    fn too_long_is_refused() {
        let long = "a".repeat(250);
        assert!(value(Some(&long), &md())
            .unwrap_err()
            .contains("at most 256"));
    }

    #[test]
    fn a_client_is_made_ready_only_when_the_run_will_likely_tag() {
        let on = crate::spec::tagging::TaggingSpec {
            enabled: true,
            required: false,
            sync_budget: std::time::Duration::from_secs(3),
            background_deadline: std::time::Duration::from_secs(600),
            spread: std::time::Duration::ZERO,
            ec2_endpoint: None,
        };
        let off = crate::spec::tagging::TaggingSpec {
            enabled: false,
            ..on.clone()
        };
        let named = crate::facts::InstanceTags::Known([("Name".into(), "n".into())].into());
        let unnamed = crate::facts::InstanceTags::Known(Default::default());
        assert!(likely(&on, &crate::facts::InstanceTags::Unknown));
        assert!(likely(&on, &unnamed));
        assert!(
            !likely(&on, &named),
            "set: the plan tags only if it changed"
        );
        assert!(!likely(&off, &crate::facts::InstanceTags::Unknown));
    }
}
