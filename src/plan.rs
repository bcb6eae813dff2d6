//! The plan: everything the agent will do, computed from the config, the instance metadata and
//! the node's current files, before anything changes. `--dry-run` prints it; apply executes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::Digest;

use crate::config::Config;
use crate::fsutil::{self, under};
use crate::handoff::{self, Family};
use crate::kubelet;
use crate::logind;
use crate::metadata::{self, Metadata};
use crate::sysctl;
use crate::validate::{self, normalize_sysctl_value, Finding, Invalid, PROTECTED_KERNEL_DEFAULTS};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub instance: Instance,
    pub family: Family,
    pub family_reason: String,
    pub steps: Vec<Step>,
    pub warnings: Vec<String>,
    /// Values never to print (the cluster CA): replaced by a digest in every rendering.
    #[serde(skip)]
    pub secrets: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub address: String,
    pub availability_zone: String,
    pub region: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Step {
    /// Set the instance's Name tag. `current` is `None` when the tags are not visible in IMDS:
    /// apply reads them with DescribeTags first.
    #[serde(rename_all = "camelCase")]
    Tag {
        instance_id: String,
        key: String,
        value: String,
        current: Option<String>,
        /// Whether `current` was read (IMDS tags or DescribeTags) or is unknown.
        current_known: bool,
    },
    #[serde(rename_all = "camelCase")]
    Sysctl {
        key: String,
        path: PathBuf,
        old: String,
        new: String,
    },
    #[serde(rename_all = "camelCase")]
    File {
        purpose: String,
        /// The node path (without the root).
        path: PathBuf,
        old: Option<String>,
        new: String,
        mode: u32,
        /// One-time backup of the original, when it does not exist yet.
        backup: Option<PathBuf>,
    },
    #[serde(rename_all = "camelCase")]
    NotifyLogind { inhibit_delay_max_usec: u64 },
    #[serde(rename_all = "camelCase")]
    ExecBootstrap { argv: Vec<String> },
    #[serde(rename_all = "camelCase")]
    Nodeadm { dropin: PathBuf, note: String },
}

impl Step {
    /// Steps that change the node's files or kernel (what a second run must not plan).
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Step::Sysctl { .. } | Step::File { .. } | Step::NotifyLogind { .. } | Step::Tag { .. }
        )
    }
}

/// Build the plan. Reads the node's files under `root`; writes nothing. All problems with the
/// config, static or found on the node, come back together.
pub fn build(root: &Path, c: &Config, md: &Metadata) -> Result<Plan, Invalid> {
    build_with(root, c, Some(md))
}

/// Every finding for this config on this node, without instance metadata (no tag step).
pub fn check(root: &Path, c: &Config) -> Vec<Finding> {
    match build_with(root, c, None) {
        Ok(_) => Vec::new(),
        Err(Invalid(f)) => f,
    }
}

/// Read a file the plan compares against; an unreadable file is a finding, never "absent".
fn read_current(path: &Path, field: &str, findings: &mut Vec<Finding>) -> Option<String> {
    match fsutil::read_optional(path) {
        Ok(v) => v,
        Err(e) => {
            findings.push(Finding {
                field: field.into(),
                message: format!("{e}; the agent will not overwrite a file it cannot read"),
            });
            None
        }
    }
}

fn build_with(root: &Path, c: &Config, md: Option<&Metadata>) -> Result<Plan, Invalid> {
    let mut findings = validate::check_config(c);
    let mut steps = Vec::new();
    let mut warnings = Vec::new();

    let family = handoff::detect(root, c);
    let (family, family_reason) = match family {
        Ok(f) => f,
        Err(e) => {
            findings.push(Finding {
                field: "handoff.mode".into(),
                message: e.to_string(),
            });
            (Family::Al2023, String::new())
        }
    };

    // 1. Name tag
    if let (true, Some(md)) = (c.tagging.enabled, md) {
        match metadata::name_tag(c.node_group.name.as_deref(), md) {
            Ok(value) => {
                let current = md.tags.as_ref().map(|t| t.get("Name").cloned());
                match current {
                    Some(Some(cur)) if cur == value => {}
                    other => steps.push(Step::Tag {
                        instance_id: md.instance_id.clone(),
                        key: "Name".into(),
                        value,
                        current_known: other.is_some(),
                        current: other.flatten(),
                    }),
                }
            }
            Err(e) => findings.push(Finding {
                field: "nodeGroup.name".into(),
                message: e,
            }),
        }
    }
    if let Some(tags) = md.and_then(|m| m.tags.as_ref()) {
        let key = format!("kubernetes.io/cluster/{}", c.cluster.name);
        if !tags.contains_key(&key) {
            warnings.push(format!(
                "the instance has no `{key}` tag: a self-managed node without it does not join; have the Auto Scaling group propagate it at launch"
            ));
        }
    }

    // kubelet config (AL2 only: on AL2023 nodeadm writes it from the NodeConfig)
    let mut protect_kernel_defaults = family == Family::Al2023;
    let mut kubelet_step = None;
    if family == Family::Al2 {
        let kpath = under(root, &c.kubelet.config_path);
        match fsutil::read_optional(&kpath) {
            Ok(Some(text)) => {
                let shown = kpath.display().to_string();
                match kubelet::parse(&text, &shown) {
                    Ok(m) => protect_kernel_defaults = kubelet::protects_kernel_defaults(&m),
                    Err(e) => findings.push(Finding {
                        field: "kubelet.configPath".into(),
                        message: e.to_string(),
                    }),
                }
                match kubelet::patch(&text, &shown, &c.kubelet) {
                    Ok(Some(p)) => {
                        for k in &p.kept {
                            warnings.push(format!(
                                "kubelet config keeps the operator's {} = {} (the config asks for {}); set kubelet.overwrite to replace it",
                                k.key, k.existing, k.wanted
                            ));
                        }
                        if !p.changed_keys.is_empty() {
                            let backup = c.kubelet.config_path.with_file_name(format!(
                                "{}.orig",
                                c.kubelet
                                    .config_path
                                    .file_name()
                                    .unwrap_or_default()
                                    .to_string_lossy()
                            ));
                            let backup = (!under(root, &backup).exists()).then_some(backup);
                            kubelet_step = Some(Step::File {
                                purpose: format!(
                                    "kubelet config: set {}",
                                    p.changed_keys.join(", ")
                                ),
                                path: c.kubelet.config_path.clone(),
                                old: Some(text),
                                new: p.new_text,
                                mode: fsutil::mode_of(&kpath).unwrap_or(0o644),
                                backup,
                            });
                        }
                    }
                    Ok(None) => {}
                    Err(_) => {} // reported above
                }
            }
            Ok(None) => {
                if !kubelet::desired(&c.kubelet).is_empty() {
                    findings.push(Finding {
                        field: "kubelet.configPath".into(),
                        message: format!(
                            "{} does not exist; on Amazon Linux 2 the EKS AMI ships it: check kubelet.configPath",
                            kpath.display()
                        ),
                    });
                }
            }
            Err(e) => findings.push(Finding {
                field: "kubelet.configPath".into(),
                message: e.to_string(),
            }),
        }
    }

    // 2. sysctls: live and persisted
    let mut wanted: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in &c.sysctls {
        let v = normalize_sysctl_value(&v.as_string());
        if validate::check_sysctl_key(k).is_err() {
            continue; // reported by check_config
        }
        if protect_kernel_defaults {
            if let Some((_, need)) = PROTECTED_KERNEL_DEFAULTS.iter().find(|(pk, _)| pk == k) {
                if v != *need {
                    findings.push(Finding {
                        field: format!("sysctls[\"{k}\"]"),
                        message: format!(
                            "{v} contradicts kubelet's protectKernelDefaults (on in {}), which requires {k} = {need}: kubelet would refuse to start; remove it or use {need}",
                            if family == Family::Al2 { c.kubelet.config_path.display().to_string() } else { "nodeadm's generated kubelet config".into() }
                        ),
                    });
                    continue;
                }
            }
        }
        match sysctl::read_live(root, k) {
            Ok(old) => {
                if old != v {
                    steps.push(Step::Sysctl {
                        key: k.clone(),
                        path: Path::new("/proc/sys").join(k.replace('.', "/")),
                        old,
                        new: v.clone(),
                    });
                }
                wanted.insert(k.clone(), v);
            }
            Err(e) => findings.push(Finding {
                field: format!("sysctls[\"{}\"]", validate::printable(k)),
                message: e.to_string(),
            }),
        }
    }
    let sysctl_file = under(root, sysctl::PERSIST_PATH);
    let existing = read_current(&sysctl_file, "sysctls", &mut findings);
    if !c.sysctls.is_empty() || existing.is_some() {
        let new = sysctl::persisted_content(&wanted);
        if existing.as_deref() != Some(new.as_str()) {
            steps.push(Step::File {
                purpose: "persisted sysctls".into(),
                path: PathBuf::from(sysctl::PERSIST_PATH),
                old: existing,
                new,
                mode: fsutil::mode_of(&sysctl_file).unwrap_or(0o644),
                backup: None,
            });
        }
    }

    // 3. kubelet config
    if let Some(s) = kubelet_step {
        steps.push(s);
    }

    // 4. logind
    let grace = c
        .kubelet
        .shutdown_grace_period
        .as_deref()
        .and_then(|g| crate::duration::parse(g).ok())
        .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
    if let Some(sec) = c.logind.inhibit_delay_max_sec.or(grace).filter(|s| *s > 0) {
        let content = logind::dropin_content(sec);
        let dpath = under(root, logind::DROPIN_PATH);
        let old = read_current(&dpath, "logind", &mut findings);
        let settings = logind::effective_settings(root, Some(&content));
        if let Some(last) = settings.last() {
            if last.file != Path::new(logind::DROPIN_PATH) && last.seconds < sec as f64 {
                warnings.push(format!(
                    "{} sorts after {} and sets InhibitDelayMaxSec={}; logind will use it, not {sec}",
                    last.file.display(),
                    logind::DROPIN_PATH,
                    last.seconds
                ));
            }
        }
        if old.as_deref() != Some(content.as_str()) {
            steps.push(Step::File {
                purpose: "systemd-logind drop-in".into(),
                path: PathBuf::from(logind::DROPIN_PATH),
                old,
                new: content,
                mode: fsutil::mode_of(&dpath).unwrap_or(0o644),
                backup: None,
            });
            steps.push(Step::NotifyLogind {
                inhibit_delay_max_usec: sec * 1_000_000,
            });
        }
    }

    // 5. hand-off
    match family {
        Family::Al2 => steps.push(Step::ExecBootstrap {
            argv: handoff::al2_argv(root, c),
        }),
        Family::Al2023 => {
            let path = under(root, handoff::NODECONFIG_DROPIN);
            let new = handoff::nodeconfig_text(c);
            let old = read_current(&path, "handoff", &mut findings);
            if old.as_deref() != Some(new.as_str()) {
                steps.push(Step::File {
                    purpose: "nodeadm NodeConfig drop-in".into(),
                    path: PathBuf::from(handoff::NODECONFIG_DROPIN),
                    old,
                    new,
                    mode: fsutil::mode_of(&path).unwrap_or(0o600),
                    backup: None,
                });
            }
            steps.push(Step::Nodeadm {
                dropin: PathBuf::from(handoff::NODECONFIG_DROPIN),
                note: "nodeadm-run.service (after cloud-final.service) reads imds://user-data then file:///etc/eks/nodeadm.d/ and starts kubelet; the agent exits 0".into(),
            });
            if md.and_then(|m| m.user_data_has_node_config) == Some(false) {
                warnings.push(
                    "the instance's user data holds no NodeConfig: nodeadm-run reads imds://user-data first and fails without one (\"could not find NodeConfig within UserData\"); add an application/node.eks.aws MIME part with at least the cluster block (examples/cloud-init/al2023-userdata.mime)".into(),
                );
            }
            if !under(root, &c.handoff.nodeadm_path).is_file() {
                warnings.push(format!(
                    "{} does not exist under the root: nothing will read the NodeConfig drop-in",
                    c.handoff.nodeadm_path.display()
                ));
            }
        }
    }

    if !findings.is_empty() {
        return Err(Invalid(findings));
    }
    let secrets = c.cluster.certificate_authority.iter().cloned().collect();
    let md = md.cloned().unwrap_or_default();
    Ok(Plan {
        instance: Instance {
            instance_id: md.instance_id.clone(),
            instance_type: md.instance_type.clone(),
            address: md
                .private_ipv4
                .clone()
                .or_else(|| md.ipv6.clone())
                .unwrap_or_default(),
            availability_zone: md.availability_zone.clone(),
            region: md.region.clone(),
        },
        family,
        family_reason,
        steps,
        warnings,
        secrets,
    })
}

/// How a secret is shown: its length and a digest prefix, enough to tell two CAs apart.
pub fn redaction(secret: &str) -> String {
    let d = sha2::Sha256::digest(secret.as_bytes());
    let hex: String = d.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("<redacted {} bytes sha256:{hex}>", secret.len())
}

pub fn redact(plan: &Plan, text: &str) -> String {
    let mut out = text.to_string();
    for s in &plan.secrets {
        if !s.is_empty() {
            out = out.replace(s, &redaction(s));
        }
    }
    out
}

impl Plan {
    pub fn changes(&self) -> usize {
        self.steps.iter().filter(|s| s.is_change()).count()
    }

    /// A stable JSON document, secrets redacted.
    pub fn to_json(&self) -> String {
        let v = serde_json::json!({
            "apiVersion": "eks-nodeinit/v1",
            "kind": "Plan",
            "instance": self.instance,
            "family": self.family,
            "familyReason": self.family_reason,
            "changes": self.changes(),
            "steps": self.steps,
            "warnings": self.warnings,
        });
        let mut s = serde_json::to_string_pretty(&v).expect("serialises");
        s.push('\n');
        redact(self, &s)
    }

    /// Human-readable plan with unified diffs, secrets redacted.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let i = &self.instance;
        let _ = writeln!(
            o,
            "eks-nodeinit plan for {} ({}, {}, {})",
            i.instance_id, i.instance_type, i.address, i.availability_zone
        );
        let _ = writeln!(
            o,
            "node family: {} ({})",
            match self.family {
                Family::Al2 => "Amazon Linux 2, hand-off to bootstrap.sh",
                Family::Al2023 => "Amazon Linux 2023, hand-off to nodeadm",
            },
            self.family_reason
        );
        if self.changes() == 0 {
            let _ = writeln!(
                o,
                "no changes: tags, sysctls and files are already as configured"
            );
        }
        for (n, s) in self.steps.iter().enumerate() {
            let n = n + 1;
            match s {
                Step::Tag {
                    instance_id,
                    key,
                    value,
                    current,
                    current_known,
                } => {
                    let cur = match (current, current_known) {
                        (Some(c), _) => format!("currently `{c}`"),
                        (None, true) => "currently unset".into(),
                        (None, false) => "current tags not visible in IMDS: DescribeTags first, CreateTags only if different".into(),
                    };
                    let _ = writeln!(o, "\n[{n}] tag {instance_id}: {key} = {value} ({cur})");
                }
                Step::Sysctl { key, old, new, .. } => {
                    let _ = writeln!(o, "\n[{n}] sysctl {key}: {old} -> {new}");
                }
                Step::File {
                    purpose,
                    path,
                    old,
                    new,
                    mode,
                    backup,
                } => {
                    let what = if old.is_some() { "update" } else { "create" };
                    let _ = write!(
                        o,
                        "\n[{n}] {what} {} ({purpose}; mode {mode:04o}",
                        path.display()
                    );
                    if let Some(b) = backup {
                        let _ = write!(o, "; original kept as {}", b.display());
                    }
                    let _ = writeln!(o, ")");
                    o.push_str(&unified_diff(path, old.as_deref(), new));
                }
                Step::NotifyLogind {
                    inhibit_delay_max_usec,
                } => {
                    let _ = writeln!(
                        o,
                        "\n[{n}] restart systemd-logind.service over D-Bus and expect InhibitDelayMaxUSec = {inhibit_delay_max_usec}"
                    );
                }
                Step::ExecBootstrap { argv } => {
                    let _ = writeln!(o, "\n[{n}] hand-off: exec {} (no shell), argv:", argv[0]);
                    for (j, a) in argv.iter().enumerate() {
                        let _ = writeln!(o, "      [{j}] {a}");
                    }
                }
                Step::Nodeadm { dropin, note } => {
                    let _ = writeln!(
                        o,
                        "\n[{n}] hand-off: NodeConfig drop-in {}; {note}",
                        dropin.display()
                    );
                }
            }
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(o, "\nwarnings:");
            for w in &self.warnings {
                let _ = writeln!(o, "  - {w}");
            }
        }
        redact(self, &o)
    }
}

/// A unified diff of one file, `/dev/null` for a new one.
pub fn unified_diff(path: &Path, old: Option<&str>, new: &str) -> String {
    let p = path.display().to_string();
    let a = if old.is_some() {
        format!("a{p}")
    } else {
        "/dev/null".into()
    };
    similar::TextDiff::from_lines(old.unwrap_or(""), new)
        .unified_diff()
        .context_radius(3)
        .header(&a, &format!("b{p}"))
        .to_string()
}
