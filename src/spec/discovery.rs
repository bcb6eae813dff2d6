//! The `cluster.discovery` section: its sources (Parameter Store paths and names as Parameter
//! Store accepts them, DescribeCluster), endpoints, deadline and spread, checked into a
//! [`DiscoverySpec`] that `crate::discovery` runs.

use std::time::Duration;

use serde::Serialize;

use crate::base::findings::Findings;
use crate::base::text::printable;
use crate::config::{self, DiscoverySource};

/// The config field every discovery finding is reported under.
pub(crate) const FIELD: &str = "cluster.discovery";

/// The three values discovery can supply, as the config names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    Endpoint,
    Ca,
    Cidr,
}

impl Value {
    pub(crate) const ALL: [Value; 3] = [Value::Endpoint, Value::Ca, Value::Cidr];

    pub fn field(self) -> &'static str {
        match self {
            Value::Endpoint => "apiServerEndpoint",
            Value::Ca => "certificateAuthority",
            Value::Cidr => "cidr",
        }
    }
}

/// One checked source.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// `GetParametersByPath` on `path`; `names` under it for endpoint, CA, CIDR.
    SsmPath { path: String, names: [String; 3] },
    /// `GetParameters` by full names for endpoint, CA, CIDR (`None`: not looked up here).
    SsmParameters { names: [Option<String>; 3] },
    /// `DescribeCluster` on the cluster's name.
    DescribeCluster,
}

impl Source {
    pub fn describe(&self, cluster: &str) -> String {
        match self {
            Source::SsmPath { path, .. } => format!("SSM path {path}"),
            Source::SsmParameters { .. } => "SSM parameters".into(),
            Source::DescribeCluster => format!("DescribeCluster {cluster}"),
        }
    }
}

/// The discovery section, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoverySpec {
    pub sources: Vec<Source>,
    pub ssm_endpoint: Option<String>,
    pub eks_endpoint: Option<String>,
    pub deadline: Duration,
    pub spread: Duration,
    pub cache: bool,
}

impl DiscoverySpec {
    /// What a cached answer must have been asked with to be used: the cluster and the sources.
    pub fn key(&self, cluster: &str) -> String {
        serde_json::json!({"cluster": cluster, "sources": self.sources}).to_string()
    }
}

/// Check `cluster.discovery`. `None` when absent (or when it has a finding).
pub fn spec(c: &config::Cluster, f: &mut Findings) -> Option<DiscoverySpec> {
    let d = c.discovery.as_ref()?;
    let before = f.0.len();
    let given = match &d.sources {
        Some(s) => s.clone(),
        None => vec![DiscoverySource::SsmPath(config::SsmPath {
            path: format!("/eks/{}", c.name),
            names: config::ParameterNames::default(),
        })],
    };
    if given.is_empty() {
        f.push(
            format!("{FIELD}.sources"),
            "is empty; give at least one source, or remove `discovery` and give the values",
        );
    }
    let sources = given
        .iter()
        .enumerate()
        .map(|(i, s)| source(&format!("{FIELD}.sources[{i}]"), s, f))
        .collect();
    check_settings(d, f);
    (f.0.len() == before).then(|| DiscoverySpec {
        sources,
        ssm_endpoint: d.ssm_endpoint.clone(),
        eks_endpoint: d.eks_endpoint.clone(),
        deadline: Duration::from_secs(d.deadline_sec),
        spread: Duration::from_secs_f64(d.spread_sec.clamp(0.0, 3600.0)),
        cache: d.cache,
    })
}

/// One source, checked (`at` is its field).
fn source(at: &str, s: &DiscoverySource, f: &mut Findings) -> Source {
    match s {
        DiscoverySource::SsmPath(p) => {
            check_ssm_name(&format!("{at}.ssmPath.path"), &p.path, true, f);
            let n = &p.names;
            let names = [
                n.api_server_endpoint.clone(),
                n.certificate_authority.clone(),
                n.cidr.clone(),
            ];
            for (v, name) in Value::ALL.iter().zip(&names) {
                let leaf_ok = !name.is_empty()
                    && name
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'));
                if !leaf_ok {
                    f.push(format!("{at}.ssmPath.names.{}", v.field()), format!(
                        "`{}` is not a parameter name under the path (letters, digits, `_`, `.`, `-`)",
                        printable(name)
                    ));
                }
            }
            Source::SsmPath {
                path: p.path.trim_end_matches('/').to_string(),
                names,
            }
        }
        DiscoverySource::SsmParameters(p) => {
            let names = [
                p.api_server_endpoint.clone(),
                p.certificate_authority.clone(),
                p.cidr.clone(),
            ];
            if names.iter().all(Option::is_none) {
                f.push(
                    format!("{at}.ssmParameters"),
                    "names no parameter; give the full name of at least one value",
                );
            }
            for (v, name) in Value::ALL.iter().zip(&names) {
                if let Some(n) = name {
                    check_ssm_name(&format!("{at}.ssmParameters.{}", v.field()), n, false, f);
                }
            }
            Source::SsmParameters { names }
        }
        DiscoverySource::DescribeCluster(_) => Source::DescribeCluster,
    }
}

/// The endpoints, the deadline and the spread.
fn check_settings(d: &config::Discovery, f: &mut Findings) {
    for (field, ep) in [
        ("ssmEndpoint", &d.ssm_endpoint),
        ("eksEndpoint", &d.eks_endpoint),
    ] {
        if let Some(ep) = ep {
            if !(ep.starts_with("https://") || ep.starts_with("http://")) || ep.len() > 2048 {
                f.push(
                    format!("{FIELD}.{field}"),
                    format!("`{}` is not an http(s) URL", printable(ep)),
                );
            }
        }
    }
    if !(1..=3600).contains(&d.deadline_sec) {
        f.push(
            format!("{FIELD}.deadlineSec"),
            format!("{} is out of range: 1 to 3600 seconds", d.deadline_sec),
        );
    }
    if !(0.0..=3600.0).contains(&d.spread_sec) {
        f.push(
            format!("{FIELD}.spreadSec"),
            format!("{} is out of range: 0 to 3600 seconds", d.spread_sec),
        );
    }
}

/// Parameter Store names: `/`-separated parts of letters, digits, `_.-`, at most 2048
/// characters (a path: starting with `/`).
fn check_ssm_name(field: &str, name: &str, path: bool, f: &mut Findings) {
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    let shape_ok = if path {
        name.starts_with('/')
    } else {
        !name.is_empty() && !name.ends_with('/')
    };
    if !chars_ok || !shape_ok || name.len() > 2048 || name.contains("//") {
        f.push(
            field,
            format!(
                "`{}` is not a Parameter Store {} (letters, digits, `_.-` in `/`-separated parts{})",
                printable(name),
                if path { "path" } else { "parameter name" },
                if path { ", starting with `/`" } else { "" }
            ),
        );
    }
}
