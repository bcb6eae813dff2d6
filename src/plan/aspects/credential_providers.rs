//! Image credential providers (`kubelet.credentialProviders`, docs/credential-providers.md): the
//! node's own `CredentialProviderConfig` (its ECR provider) merged with the config's providers
//! into a file of the agent's, and the kubelet pointed at it with
//! `--image-credential-provider-config`, which the kubelet takes last-wins: bootstrap.sh's
//! `--kubelet-extra-args` come after kubelet.service's own flag (AL2), NodeConfig
//! `kubelet.flags` after nodeadm's (AL2023). The plugin directory stays the node's.
//!
//! One setting: its contribution (the flag, the findings) and its plan (the file) build the
//! same merged document from the same facts.

use std::path::Path;

use serde_json::{json, Value};

use crate::base::findings::Findings;
use crate::facts::Read;
use crate::facts::{Facts, Family};
use crate::plan::kubelet::KubeletIntent;
use crate::plan::step::Mode;
use crate::spec::Spec;

use super::{Aspect, Contribution, Input, Out, Reads};

/// The node's own config: written by the AMI (AL2) or by nodeadm at every run (AL2023).
pub const NODE_CONFIG: &str = "/etc/eks/image-credential-provider/config.json";
/// The plugin directory both hand-offs pass as `--image-credential-provider-bin-dir`.
pub const BIN_DIR: &str = "/etc/eks/image-credential-provider";
/// The merged config the kubelet is pointed at.
pub const OWN_CONFIG: &str = "/etc/eks-nodeinit/image-credential-provider.json";
/// `kubelet --version` as the AMI build kept it; nodeadm's first source for the version.
pub const KUBELET_VERSION: &str = "/etc/eks/kubelet-version.txt";
const FIELD: &str = "kubelet.credentialProviders";
const FLAG: &str = "--image-credential-provider-config";

pub(crate) const ASPECT: Aspect = Aspect {
    name: "credential providers",
    reads,
    contribute: Contribution::Kubelet(contribute),
    plan,
};

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let list = &spec.kubelet.credential_providers;
    if list.is_empty() {
        return;
    }
    r.file(NODE_CONFIG);
    r.file(KUBELET_VERSION);
    r.file(OWN_CONFIG);
    r.extend(
        list.iter()
            .map(|p| Read::Executable(Path::new(BIN_DIR).join(&p.name))),
    );
}

fn contribute(spec: &Spec, _: &Facts, k: &mut KubeletIntent, _: &mut Findings) {
    if spec.kubelet.credential_providers.is_empty() {
        return;
    }
    // The file is the plan's; a merge that fails is its finding, which stops the run.
    k.flags.push(format!("{FLAG}={OWN_CONFIG}"));
}

fn plan(i: &Input, out: &mut Out) {
    if i.spec.kubelet.credential_providers.is_empty() {
        return;
    }
    let Some((doc, how)) = merged(i.spec, i.facts, &mut out.findings, &mut out.warnings) else {
        return;
    };
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    let purpose = format!("the kubelet's image credential providers, the node's first; {how}");
    out.file(
        i.facts,
        FIELD,
        OWN_CONFIG,
        purpose,
        text,
        Mode::Exact(0o644),
    );
}

/// The kubelet's version (major, minor, patch) from [`KUBELET_VERSION`]: its first `vX.Y.Z`.
fn kubelet_version(facts: &Facts) -> Option<(u64, u64, u64)> {
    let text = facts.text(KUBELET_VERSION)?;
    text.match_indices('v').find_map(|(i, _)| {
        let mut parts = text[i + 1..].splitn(3, '.');
        let mut next = |all: bool| {
            let p = parts.next()?;
            let digits = if all {
                p
            } else {
                &p[..p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len())]
            };
            digits.parse::<u64>().ok()
        };
        Some((next(true)?, next(true)?, next(false)?))
    })
}

/// The merged `CredentialProviderConfig` and how its API version was chosen; `None` (with
/// findings) when the kubelet would refuse it or the node's own config cannot be kept.
fn merged(
    spec: &Spec,
    facts: &Facts,
    f: &mut Findings,
    warnings: &mut Vec<String>,
) -> Option<(Value, String)> {
    let list = &spec.kubelet.credential_providers;
    if list.is_empty() {
        return None;
    }
    let version = kubelet_version(facts);
    // nodeadm and bootstrap.sh: v1 from 1.27 on, v1alpha1 before.
    let (v1, how) = match version {
        Some((a, b, c)) => (
            (a, b) >= (1, 27),
            format!("kubelet v{a}.{b}.{c}, {KUBELET_VERSION}"),
        ),
        None => (
            true,
            format!("no {KUBELET_VERSION}: kubelet 1.27 or later assumed"),
        ),
    };
    let suffix = if v1 { "v1" } else { "v1alpha1" };
    let before = f.0.len();
    let mut providers = node_providers(facts, version, f)?;
    if !v1 {
        // What bootstrap.sh did to the node's file for such a kubelet.
        for p in providers.iter_mut().filter_map(Value::as_object_mut) {
            p.insert(
                "apiVersion".into(),
                format!("credentialprovider.kubelet.k8s.io/{suffix}").into(),
            );
        }
    }
    for (i, p) in list.iter().enumerate() {
        let at = format!("{FIELD}[{i}]");
        check_against_node(&at, &p.name, &providers, facts, f);
        if p.token_attributes.is_some() {
            match version {
                Some(v) if v < (1, 34, 0) => f.push(format!("{at}.tokenAttributes"), format!(
                    "the node's kubelet ({how}) refuses tokenAttributes: they need kubelet 1.34 or later (1.33 only with the KubeletServiceAccountTokenForCredentialProviders gate)"
                )),
                None if facts.family() == Some(Family::Al2) => f.push(format!("{at}.tokenAttributes"),
                    "no EKS AL2 AMI has a kubelet of 1.33 or later (EKS published AL2 AMIs up to Kubernetes 1.32), and an older kubelet never sends a token: use AL2023, or leave tokenAttributes out"
                ),
                None => warnings.push(format!(
                    "{at}.tokenAttributes: the kubelet's version is not recorded on the node ({KUBELET_VERSION}); a kubelet older than 1.34 refuses them at start"
                )),
                Some(_) => {}
            }
        }
        let mut v = serde_json::to_value(p).unwrap_or_default();
        v["apiVersion"] = format!("credentialprovider.kubelet.k8s.io/{suffix}").into();
        providers.push(v);
    }
    if f.0.len() > before {
        return None;
    }
    let doc = json!({
        "apiVersion": format!("kubelet.config.k8s.io/{suffix}"),
        "kind": "CredentialProviderConfig",
        "providers": providers,
    });
    Some((doc, format!("apiVersion {suffix}: {how}")))
}

/// A provider of the config's against the node: no name of the node's own, its plugin there.
fn check_against_node(at: &str, name: &str, node: &[Value], facts: &Facts, f: &mut Findings) {
    if node.iter().any(|p| p["name"] == name) {
        f.push(format!("{at}.name"), format!(
            "`{name}` is the node's own provider in {NODE_CONFIG}: the agent adds providers and never replaces the node's; choose another name"
        ));
    }
    // The spec passed only file names (`spec::kubelet`).
    let bin = Path::new(BIN_DIR).join(name);
    if !facts.executable(&bin) {
        f.push(format!("{at}.name"), format!(
            "no executable {} on the node: the kubelet refuses to start without its plugin; install it there first",
            bin.display()
        ));
    }
}

/// The node's own providers, unchanged: its config file as found, or on AL2023 before nodeadm
/// has written it, what nodeadm writes.
fn node_providers(
    facts: &Facts,
    version: Option<(u64, u64, u64)>,
    f: &mut Findings,
) -> Option<Vec<Value>> {
    let text = match facts.file_text(NODE_CONFIG) {
        Ok(Some(t)) => t,
        Ok(None) if facts.family() == Some(Family::Al2023) => {
            return Some(vec![nodeadm_ecr(version)])
        }
        Ok(None) => {
            f.push(FIELD, format!(
                "the node has no {NODE_CONFIG}, the config its kubelet unit names: the agent adds providers after the node's own and has none to keep"
            ));
            return None;
        }
        Err(e) => {
            f.push(FIELD, e);
            return None;
        }
    };
    let providers = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["providers"].as_array().cloned());
    if providers.is_none() {
        f.push(FIELD, format!(
            "{NODE_CONFIG} is not a JSON CredentialProviderConfig with providers: the agent merges with the node's providers and will not guess them"
        ));
    }
    providers
}

/// The ECR provider nodeadm writes (its `image-credential-provider.go`): the ECR registries'
/// host patterns, ECR Public's newer name from kubelet 1.32 on, twelve hours' cache.
fn nodeadm_ecr(version: Option<(u64, u64, u64)>) -> Value {
    let mut images: Vec<&str> = [
        "*.dkr.ecr.*.amazonaws.com",
        "*.dkr-ecr.*.on.aws",
        "*.dkr.ecr.*.amazonaws.com.cn",
        "*.dkr-ecr.*.on.amazonwebservices.com.cn",
        "*.dkr.ecr-fips.*.amazonaws.com",
        "*.dkr-ecr-fips.*.on.aws",
        "*.dkr.ecr.*.c2s.ic.gov",
        "*.dkr.ecr.*.sc2s.sgov.gov",
        "*.dkr.ecr.*.cloud.adc-e.uk",
        "*.dkr.ecr.*.csp.hci.ic.gov",
        "*.dkr.ecr.*.amazonaws.eu",
        "public.ecr.aws",
    ]
    .to_vec();
    if version.map_or(true, |v| v >= (1, 32, 0)) {
        images.push("ecr-public.aws.com");
    }
    json!({
        "name": "ecr-credential-provider",
        "matchImages": images,
        "defaultCacheDuration": "12h0m0s",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::aspects::testing;
    use serde_json::json;

    const AL2_NODE: &str = r#"{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
        "providers": [{"name": "ecr-credential-provider", "matchImages": ["*.dkr.ecr.*.amazonaws.com"],
        "defaultCacheDuration": "12h", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"}]}"#;

    fn config(providers: Value) -> String {
        json!({"cluster": {"name": "c"}, "kubelet": {"credentialProviders": providers}}).to_string()
    }

    fn mine() -> Value {
        json!([{"name": "my-cred", "matchImages": ["registry.example.com:5000/team"],
                "defaultCacheDuration": "5m", "args": ["--v"], "env": [{"name": "A", "value": "b"}]}])
    }

    fn plugin(b: crate::facts::FactsBuilder, name: &str) -> crate::facts::FactsBuilder {
        b.executable(Path::new(BIN_DIR).join(name), true)
    }

    /// The document the aspect writes and the contributor's flags, or the findings.
    fn run(config: &str, facts: &Facts) -> Result<(Value, Vec<String>), Vec<String>> {
        let spec = testing::spec(config);
        let out = testing::run(&ASPECT, &spec, facts);
        if !out.findings.is_empty() {
            return Err(testing::findings(&out));
        }
        let mut f = Findings::default();
        let k = super::super::intent(&spec, facts, &mut f).kubelet;
        let Some(crate::plan::step::Step::File(file)) = out.steps.first() else {
            panic!("no file: {:?}", out.steps);
        };
        Ok((serde_json::from_str(&file.new).unwrap(), k.flags))
    }

    #[test]
    fn al2_keeps_the_nodes_provider_first_and_adds_the_configs() {
        let facts = plugin(Facts::builder(Family::Al2), "my-cred")
            .file(NODE_CONFIG, AL2_NODE)
            .absent([KUBELET_VERSION, OWN_CONFIG])
            .build();
        let (doc, flags) = run(&config(mine()), &facts).unwrap();
        let node: Value = serde_json::from_str(AL2_NODE).unwrap();
        assert_eq!(doc["apiVersion"], "kubelet.config.k8s.io/v1");
        assert_eq!(doc["providers"][0], node["providers"][0], "unchanged");
        let want = json!({"name": "my-cred", "matchImages": ["registry.example.com:5000/team"],
            "defaultCacheDuration": "5m", "args": ["--v"], "env": [{"name": "A", "value": "b"}],
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1"});
        assert_eq!(doc["providers"][1], want);
        assert_eq!(flags, [format!("{FLAG}={OWN_CONFIG}")]);
    }

    #[test]
    fn al2023_before_nodeadm_models_its_ecr_provider_and_an_old_kubelet_gets_v1alpha1() {
        let facts = plugin(Facts::builder(Family::Al2023), "my-cred")
            .absent([NODE_CONFIG, OWN_CONFIG])
            .file(KUBELET_VERSION, "Kubernetes v1.26.15-eks-1234\n")
            .build();
        let (doc, _) = run(&config(mine()), &facts).unwrap();
        assert_eq!(doc["apiVersion"], "kubelet.config.k8s.io/v1alpha1");
        let p = doc["providers"].as_array().unwrap();
        assert_eq!(p[0]["name"], "ecr-credential-provider");
        assert!(!p[0]["matchImages"]
            .to_string()
            .contains("ecr-public.aws.com"));
        for p in p {
            assert_eq!(
                p["apiVersion"],
                "credentialprovider.kubelet.k8s.io/v1alpha1"
            );
        }
        let v132 = Facts::builder(Family::Al2023).file(KUBELET_VERSION, "Kubernetes v1.32.0");
        let facts = plugin(v132, "my-cred")
            .absent([NODE_CONFIG, OWN_CONFIG])
            .build();
        let (doc, _) = run(&config(mine()), &facts).unwrap();
        assert!(doc["providers"][0]["matchImages"]
            .to_string()
            .contains("ecr-public.aws.com"));
    }

    #[test]
    fn a_name_clash_a_missing_plugin_and_an_old_kubelets_token_are_findings() {
        let token = json!({"serviceAccountTokenAudience": "a", "requireServiceAccount": true,
                           "cacheType": "Token"});
        let cfg = config(json!([
            {"name": "ecr-credential-provider", "matchImages": ["x.io"], "defaultCacheDuration": "1s"},
            {"name": "gone", "matchImages": ["y.io"], "defaultCacheDuration": "1s", "tokenAttributes": token},
        ]));
        let node = |v: &str| {
            plugin(Facts::builder(Family::Al2), "ecr-credential-provider")
                .file(NODE_CONFIG, AL2_NODE)
                .file(KUBELET_VERSION, v)
                .absent([OWN_CONFIG])
                .build()
        };
        let e = run(&cfg, &node("Kubernetes v1.33.1")).unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("kubelet.credentialProviders[0].name: `ecr-credential-provider` is the node's own provider"), "{e:?}");
        assert!(e[1].starts_with("kubelet.credentialProviders[1].name: no executable /etc/eks/image-credential-provider/gone"), "{e:?}");
        assert!(e[2].starts_with("kubelet.credentialProviders[1].tokenAttributes: the node's kubelet (kubelet v1.33.1"), "{e:?}");
        let e = run(&cfg, &node("Kubernetes v1.34.0")).unwrap_err();
        assert_eq!(e.len(), 2, "1.34 has them: {e:?}");
    }

    #[test]
    fn token_attributes_on_al2_are_refused_without_a_version_file() {
        let token = json!({"serviceAccountTokenAudience": "a", "requireServiceAccount": true,
                           "cacheType": "Token"});
        let cfg = config(json!([
            {"name": "my-cred", "matchImages": ["y.io"], "defaultCacheDuration": "1s", "tokenAttributes": token},
        ]));
        // AL2 never records its kubelet's version, and no AL2 AMI has a kubelet that sends one.
        let al2 = plugin(Facts::builder(Family::Al2), "my-cred")
            .file(NODE_CONFIG, AL2_NODE)
            .absent([KUBELET_VERSION, OWN_CONFIG])
            .build();
        let e = run(&cfg, &al2).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("kubelet.credentialProviders[0].tokenAttributes: no EKS AL2 AMI has a kubelet of 1.33"),
            "{e:?}"
        );
    }

    #[test]
    fn the_node_without_its_config_on_al2_is_a_finding() {
        let facts = plugin(Facts::builder(Family::Al2), "my-cred")
            .absent([NODE_CONFIG, KUBELET_VERSION, OWN_CONFIG])
            .build();
        let e = run(&config(mine()), &facts).unwrap_err();
        assert!(
            e[0].contains("the node has no /etc/eks/image-credential-provider/config.json"),
            "{e:?}"
        );
    }

    #[test]
    fn the_kubelets_rules_name_each_field() {
        let cfg = config(json!([
            {"name": "a b", "matchImages": ["h:port", "%zz.io", "ok.io/%41"], "defaultCacheDuration": "1d",
             "env": [{"name": "", "value": "v"}],
             "tokenAttributes": {"serviceAccountTokenAudience": "x", "requireServiceAccount": false,
                "requiredServiceAccountAnnotationKeys": ["Example.com/k"],
                "optionalServiceAccountAnnotationKeys": ["Example.com/k", "bad key"], "cacheType": "Never"}},
            {"name": "..", "matchImages": [], "defaultCacheDuration": "0"},
        ]));
        let c = crate::config::parse(&cfg, "t").unwrap();
        let e: Vec<String> = match crate::spec::from_config(&c) {
            Err(crate::base::findings::Invalid(f)) => f.iter().map(ToString::to_string).collect(),
            Ok(_) => panic!("accepted"),
        };
        let fields: Vec<&str> = e.iter().map(|m| m.split(": ").next().unwrap()).collect();
        let at = "kubelet.credentialProviders";
        let t = format!("{at}[0].tokenAttributes");
        let want = [
            format!("{at}[0].name"),
            format!("{at}[0].matchImages[0]"),
            format!("{at}[0].matchImages[1]"),
            format!("{at}[0].defaultCacheDuration"),
            format!("{at}[0].env[0]"),
            format!("{t}.requiredServiceAccountAnnotationKeys"),
            format!("{t}.optionalServiceAccountAnnotationKeys[1]"),
            t.clone(),
            format!("{t}.cacheType"),
            format!("{at}[1].name"),
            format!("{at}[1].matchImages"),
        ];
        assert_eq!(fields, want, "{e:#?}");
    }

    #[test]
    fn a_name_given_twice_or_no_file_name_never_reaches_the_node() {
        let cfg = config(json!([
            {"name": "p", "matchImages": ["a.io"], "defaultCacheDuration": "1m"},
            {"name": "p", "matchImages": ["b.io"], "defaultCacheDuration": "1m"},
            {"name": "/usr/bin/x", "matchImages": ["c.io"], "defaultCacheDuration": "1m"},
        ]));
        let c = crate::config::parse(&cfg, "t").unwrap();
        let (s, f) = crate::spec::resolve(&c);
        let fields: Vec<&str> = f.0.iter().map(|x| x.field.as_str()).collect();
        let at = "kubelet.credentialProviders";
        assert_eq!(
            fields,
            [format!("{at}[1].name"), format!("{at}[2].name")],
            "{f:?}"
        );
        assert!(f.0[0].message.contains("named twice"), "{f:?}");
        // The kubelet's own flag beside them is a finding naming its place; a longer flag is not.
        let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
        v["kubelet"]["credentialProviders"] =
            json!([{"name": "p", "matchImages": ["a.io"], "defaultCacheDuration": "1m"}]);
        v["kubelet"]["extraArgs"] = json!([
            "--image-credential-provider-config-x=1",
            "--image-credential-provider-config=/x.json"
        ]);
        let c = crate::config::parse(&v.to_string(), "t").unwrap();
        let f = crate::spec::resolve(&c).1;
        let fields: Vec<&str> = f.0.iter().map(|x| x.field.as_str()).collect();
        assert_eq!(fields, ["kubelet.extraArgs[1]"], "{f:?}");
        // The partial spec the node is still checked with asks nothing of a path the name made.
        assert!(s.kubelet.credential_providers.is_empty());
        let mut r = Reads::default();
        (ASPECT.reads)(&s, Some(Family::Al2), &mut r);
        assert!(!format!("{r:?}").contains("/usr/bin/x"), "{r:?}");
    }
}
