//! Handing the node to EKS: exec of bootstrap.sh on Amazon Linux 2, a `NodeConfig` drop-in for
//! nodeadm on Amazon Linux 2023.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::config::{Config, HandoffMode};
use crate::fsutil::under;
use crate::kubelet;
use crate::validate::{effective_labels, effective_taints};

/// nodeadm-run.service reads `file:///etc/eks/nodeadm.d/` after the instance's user data; files in
/// it merge in name order (later wins). `10-` lets an operator's own later drop-in win.
pub const NODECONFIG_DROPIN: &str = "/etc/eks/nodeadm.d/10-eks-nodeinit.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Al2,
    Al2023,
}

#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    #[error("cannot tell Amazon Linux 2 from 2023 under {root}: neither {nodeadm} nor {bootstrap} exists; set handoff.mode to \"al2\" or \"al2023\"")]
    Undetectable {
        root: PathBuf,
        nodeadm: PathBuf,
        bootstrap: PathBuf,
    },
    #[error("{path} is the Amazon Linux 2023 stub (it exits 1) and {nodeadm} is missing; this image cannot join a cluster: install nodeadm or use an EKS AL2023 AMI")]
    StubWithoutNodeadm { path: PathBuf, nodeadm: PathBuf },
    #[error("handoff.mode is \"al2\" but {path} does not exist; check handoff.bootstrapPath or use \"al2023\"")]
    MissingBootstrap { path: PathBuf },
    #[error("cannot exec {path}: {source}")]
    Exec {
        path: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("hand-off argument holds a NUL byte")]
    Nul,
}

/// The AL2023 bootstrap.sh is a stub that points at nodeadm.
fn is_al2023_stub(text: &str) -> bool {
    text.contains("nodeadm")
}

/// Pick the family, saying why.
pub fn detect(root: &Path, c: &Config) -> Result<(Family, String), HandoffError> {
    let nodeadm = under(root, &c.handoff.nodeadm_path);
    let bootstrap = under(root, &c.handoff.bootstrap_path);
    match c.handoff.mode {
        HandoffMode::Al2 => {
            if !bootstrap.is_file() {
                return Err(HandoffError::MissingBootstrap { path: bootstrap });
            }
            Ok((Family::Al2, "handoff.mode is \"al2\"".into()))
        }
        HandoffMode::Al2023 => Ok((Family::Al2023, "handoff.mode is \"al2023\"".into())),
        HandoffMode::Auto => {
            if nodeadm.is_file() {
                return Ok((
                    Family::Al2023,
                    format!(
                        "auto: found nodeadm at {}",
                        c.handoff.nodeadm_path.display()
                    ),
                ));
            }
            match std::fs::read_to_string(&bootstrap) {
                Ok(t) if is_al2023_stub(&t) => Err(HandoffError::StubWithoutNodeadm {
                    path: bootstrap,
                    nodeadm,
                }),
                Ok(_) => Ok((
                    Family::Al2,
                    format!(
                        "auto: no nodeadm; found bootstrap.sh at {}",
                        c.handoff.bootstrap_path.display()
                    ),
                )),
                Err(_) => Err(HandoffError::Undetectable {
                    root: root.to_path_buf(),
                    nodeadm,
                    bootstrap,
                }),
            }
        }
    }
}

/// kubelet flags for labels, taints and the config's extra args.
pub fn kubelet_flags(c: &Config) -> Vec<String> {
    let mut flags = Vec::new();
    let labels = effective_labels(c);
    if !labels.is_empty() {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        flags.push(format!("--node-labels={}", l.join(",")));
    }
    let taints = effective_taints(c);
    if !taints.is_empty() {
        flags.push(format!("--register-with-taints={}", taints.join(",")));
    }
    flags.extend(c.kubelet.extra_args.iter().cloned());
    flags
}

/// The exact argv for bootstrap.sh (argv[0] is the script's path under the root). Every flag
/// takes its value as the next element: bootstrap.sh would read `--flag=value` as the cluster name.
pub fn al2_argv(root: &Path, c: &Config) -> Vec<String> {
    let mut argv = vec![
        under(root, &c.handoff.bootstrap_path).display().to_string(),
        c.cluster.name.clone(),
    ];
    if let Some(ca) = &c.cluster.certificate_authority {
        argv.extend(["--b64-cluster-ca".into(), ca.clone()]);
    }
    if let Some(ep) = &c.cluster.api_server_endpoint {
        argv.extend(["--apiserver-endpoint".into(), ep.clone()]);
    }
    if let Some(cidr) = &c.cluster.cidr {
        argv.extend(["--service-ipv4-cidr".into(), cidr.clone()]);
    }
    argv.extend([
        "--container-runtime".into(),
        c.cluster.container_runtime.clone(),
    ]);
    let flags = kubelet_flags(c);
    if !flags.is_empty() {
        argv.extend(["--kubelet-extra-args".into(), flags.join(" ")]);
    }
    argv.extend(c.handoff.extra_bootstrap_args.iter().cloned());
    argv
}

/// The NodeConfig drop-in for nodeadm: the cluster block when configured, kubelet config
/// (image GC, shutdown periods) and kubelet flags (labels, taints).
pub fn nodeconfig(c: &Config) -> Value {
    let mut cluster = Map::new();
    cluster.insert("name".into(), json!(c.cluster.name));
    if let Some(v) = &c.cluster.api_server_endpoint {
        cluster.insert("apiServerEndpoint".into(), json!(v));
    }
    if let Some(v) = &c.cluster.certificate_authority {
        cluster.insert("certificateAuthority".into(), json!(v));
    }
    if let Some(v) = &c.cluster.cidr {
        cluster.insert("cidr".into(), json!(v));
    }
    let mut kubelet = Map::new();
    let cfg: Map<String, Value> = kubelet::desired(&c.kubelet)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !cfg.is_empty() {
        kubelet.insert("config".into(), Value::Object(cfg));
    }
    let flags = kubelet_flags(c);
    if !flags.is_empty() {
        kubelet.insert("flags".into(), json!(flags));
    }
    let mut spec = Map::new();
    spec.insert("cluster".into(), Value::Object(cluster));
    if !kubelet.is_empty() {
        spec.insert("kubelet".into(), Value::Object(kubelet));
    }
    json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": Value::Object(spec),
    })
}

pub fn nodeconfig_text(c: &Config) -> String {
    let mut s = serde_json::to_string_pretty(&nodeconfig(c)).expect("serialises");
    s.push('\n');
    s
}

/// Replace this process with bootstrap.sh. No shell: the argv goes to execv as is.
pub fn exec(argv: &[String]) -> Result<std::convert::Infallible, HandoffError> {
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| HandoffError::Nul))
        .collect::<Result<_, _>>()?;
    let path = cargs[0].clone();
    nix::unistd::execv(&path, &cargs).map_err(|source| HandoffError::Exec {
        path: PathBuf::from(&argv[0]),
        source,
    })
}
