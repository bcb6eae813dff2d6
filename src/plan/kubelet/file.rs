//! The node's own kubelet config file as the plan reads it (AL2's
//! `/etc/kubernetes/kubelet/kubelet-config.json`): parsed, with the file and position on error,
//! and whether it turns on `protectKernelDefaults`. The setting that patches it
//! (`aspects::kubelet_config`) and the settings that must honour what it demands read it here.

use std::path::Path;

use serde_json::{Map, Value};

use crate::facts::{Facts, Family};
use crate::instance::userdata::go_bool_flag;
use crate::spec::Spec;

#[derive(Debug, Clone, thiserror::Error)]
pub enum KubeletError {
    #[error("kubelet config {path} is not valid JSON: line {line}, column {column}: {message}; fix or restore the file (a pristine copy may be at {path}.orig)")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("kubelet config {path} is not a JSON object")]
    NotObject { path: String },
}

/// The AL2 kubelet config as found: its path under the root (for messages), text, document and
/// mode; `Ok(None)` when absent; `Err` the finding's message.
pub(crate) struct ConfigFile {
    pub shown: String,
    pub text: String,
    pub doc: Map<String, Value>,
    pub mode: Option<u32>,
}

/// Read the kubelet config out of the facts, parsed.
pub(crate) fn config_file(spec: &Spec, facts: &Facts) -> Result<Option<ConfigFile>, String> {
    let path = &spec.kubelet.config_path;
    let shown = crate::os::fsutil::under(&facts.root, path)
        .display()
        .to_string();
    let Some(file) = facts.file(path) else {
        return Ok(None);
    };
    if let Some(target) = &file.link {
        return Err(format!(
            "{shown} is a symbolic link to {}: the agent replaces files atomically and will neither replace the link with a file nor write through it; point kubelet.configPath at the file itself",
            crate::base::text::printable(&target.display().to_string())
        ));
    }
    let text = match &file.content {
        Ok(Some(t)) => t.clone(),
        Ok(None) => return Ok(None),
        Err(e) => return Err(e.clone()),
    };
    let doc = parse(&text, Path::new(&shown)).map_err(|e| e.to_string())?;
    Ok(Some(ConfigFile {
        shown,
        text,
        doc,
        mode: file.mode,
    }))
}

/// Where kubelet's `protectKernelDefaults` is on, if it is: the config's `kubelet.extraArgs`
/// (both hand-offs pass them last, so they win); on AL2023 the user data's NodeConfig (a flag,
/// then `kubelet.config`), else nodeadm's generated config (its default); on AL2 the kubelet
/// config when it says so.
pub(crate) fn protect_kernel_defaults(spec: &Spec, facts: &Facts) -> Option<String> {
    const FLAG: &str = "--protect-kernel-defaults";
    let extra = spec.registration.extra_args.iter().enumerate();
    let by_extra = extra
        .filter_map(|(i, a)| Some((go_bool_flag(a, FLAG)??, i)))
        .next_back();
    if let Some((on, i)) = by_extra {
        return on.then(|| format!("kubelet.extraArgs[{i}]"));
    }
    let mut passed = spec.kubelet.config.iter();
    if let Some((_, v)) = passed.find(|(k, _)| *k == "protectKernelDefaults") {
        return (v == &Value::Bool(true)).then(|| "kubelet.config.protectKernelDefaults".into());
    }
    match facts.family() {
        Some(Family::Al2023) => match &facts.node_configs {
            Some(nc) => match &nc.protect_kernel_defaults {
                Some((on, source)) => on.then(|| source.clone()),
                None => Some("nodeadm's generated kubelet config".into()),
            },
            _ => Some("nodeadm's generated kubelet config".into()),
        },
        Some(Family::Al2) => {
            let k = config_file(spec, facts).ok()??;
            protects_kernel_defaults(&k.doc).then_some(k.shown)
        }
        None => None,
    }
}

/// Parse the kubelet config, with the file and position on error.
pub fn parse(text: &str, path: &Path) -> Result<Map<String, Value>, KubeletError> {
    let path = path.display().to_string();
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(KubeletError::NotObject { path }),
        Err(e) => Err(KubeletError::Parse {
            path,
            line: e.line(),
            column: e.column(),
            message: crate::base::text::serde_message(&e),
        }),
    }
}

/// Does the file turn on `protectKernelDefaults`?
fn protects_kernel_defaults(m: &Map<String, Value>) -> bool {
    m.get("protectKernelDefaults") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra_args: &str) -> Spec {
        let c = format!(r#"{{"cluster":{{"name":"c"}},"kubelet":{{"extraArgs":[{extra_args}]}}}}"#);
        crate::spec::from_config(&crate::config::parse(&c, "t.json").unwrap()).unwrap()
    }

    /// An AL2023 node whose user data's NodeConfig has this `kubelet` section.
    fn al2023(kubelet: &str) -> Facts {
        let doc = format!("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster: {{name: c}}\n  kubelet: {kubelet}\n");
        Facts::builder(Family::Al2023)
            .user_data(crate::instance::userdata::UserDataFact::from_bytes(Some(
                doc.as_bytes(),
            )))
            .build()
    }

    #[test]
    fn the_user_datas_flag_or_config_and_the_configs_extra_args_turn_it_off_or_on() {
        let on = |s: &Spec, f: &Facts| protect_kernel_defaults(s, f);
        let nodeadm = Some("nodeadm's generated kubelet config".to_string());
        assert_eq!(on(&spec(""), &al2023("{}")), nodeadm);
        let off = al2023("{config: {protectKernelDefaults: false}}");
        assert_eq!(on(&spec(""), &off), None);
        // A flag wins over the config; a bare bool flag is true, `--flag false` is no value.
        let flag = al2023(
            r#"{config: {protectKernelDefaults: true}, flags: ["--protect-kernel-defaults=false"]}"#,
        );
        assert_eq!(on(&spec(""), &flag), None);
        let bare = al2023(
            r#"{config: {protectKernelDefaults: false}, flags: ["--protect-kernel-defaults false"]}"#,
        );
        assert!(on(&spec(""), &bare)
            .unwrap()
            .starts_with("kubelet.flags[0]"));
        // The config's extraArgs come last on the kubelet's command line.
        let s = spec(r#""--protect-kernel-defaults=false""#);
        assert_eq!(on(&s, &al2023("{}")), None);
        let s = spec(r#""--protect-kernel-defaults=true""#);
        assert_eq!(on(&s, &off), Some("kubelet.extraArgs[0]".into()));
        // The config's own kubelet.config key, over the NodeConfigs' (its drop-in comes later).
        let passed = |v: bool| {
            let c = format!(
                r#"{{"cluster":{{"name":"c"}},"kubelet":{{"config":{{"protectKernelDefaults":{v}}}}}}}"#
            );
            crate::spec::from_config(&crate::config::parse(&c, "t.json").unwrap()).unwrap()
        };
        assert_eq!(on(&passed(false), &al2023("{}")), None);
        let by_config = Some("kubelet.config.protectKernelDefaults".to_string());
        assert_eq!(on(&passed(true), &off), by_config);
    }
}
