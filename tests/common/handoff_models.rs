//! What each hand-off does with the agent's output before the kubelet starts, written from
//! reading the upstream sources (amazon-eks-ami), not copied from them. The control-plane suite
//! starts a real kubelet from their result (`kubelet.rs`).
//!
//! * AL2, `bootstrap.sh` (templates/al2/runtime/bootstrap.sh, the last release with AL2): once
//!   past its options it rewrites kubelet-config.json with `jq` (clusterDNS, evictionHard, its
//!   own kubeReserved from `eni-max-pods.txt`, maxPods unless `--use-max-pods false`,
//!   providerID, the systemd cgroup driver and the reserved cgroups), and kubelet.service passes
//!   `$KUBELET_EXTRA_ARGS`, which systemd splits on ASCII whitespace, after its own flags.
//! * AL2023, `nodeadm` (nodeadm/internal/api/merge.go, internal/kubelet/config.go): the
//!   NodeConfigs merged in order (maps deep-merged, later values winning; `kubelet.flags`
//!   appended), its own generated kubelet config as the config file, the merged `kubelet.config`
//!   as the kubelet's drop-in `40-nodeadm.conf` (so the kubelet itself does that merge), and the
//!   merged `kubelet.flags` after its own.

use serde_json::{json, Value};

use eks_nodeinit::base::podcap;

use super::bootstrap_sh::Parsed;
use super::kubelet::Start;

/// The instance as the hand-offs read it from IMDS.
pub struct Instance<'a> {
    pub id: &'a str,
    pub zone: &'a str,
    pub vcpus: u64,
    /// The type's line in bootstrap.sh's `eni-max-pods.txt` / nodeadm's ENI-based default.
    pub eni_max_pods: u64,
}

/// The cluster DNS address both hand-offs derive from a service CIDR, as text: an IPv4 CIDR's
/// address up to its last `.` then `.10` (bootstrap.sh's `${CIDR%.*}.10`, nodeadm's
/// `GetClusterDns`), an IPv6 CIDR's address with `a` appended (bootstrap.sh's
/// `awk -F/ '{print $1}'`, then `a`; nodeadm's `strings.Split(cidr, "/")[0] + "a"`).
pub fn cluster_dns(cidr: &str) -> String {
    let addr = cidr.split('/').next().unwrap_or_default();
    match addr.contains(':') {
        true => format!("{addr}a"),
        false => format!("{}.10", &cidr[..cidr.rfind('.').unwrap_or(0)]),
    }
}

/// The evictionHard both hand-offs write.
fn eviction_hard() -> Value {
    json!({"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%"})
}

/// Both hand-offs' kube-reserved for `inst`: the agent's own derivation of the same formulas
/// (`podcap`), checked against bootstrap.sh's shell arithmetic in tests/it/pod_capacity.rs.
fn kube_reserved(inst: &Instance) -> Value {
    json!({
        "cpu": format!("{}m", podcap::cpu_millicores_to_reserve(inst.vcpus)),
        "ephemeral-storage": "1Gi",
        "memory": format!("{}Mi", podcap::memory_mebibytes_to_reserve(inst.eni_max_pods)),
    })
}

/// bootstrap.sh's rewrite of `config` (kubelet-config.json) for `argv`, and the kubelet flags
/// from `--kubelet-extra-args`.
pub fn al2_bootstrap(config: &mut Value, argv: &Parsed, inst: &Instance) -> Vec<String> {
    let opt = |name: &str| {
        argv.options
            .iter()
            .rev()
            .find(|(o, _)| o == name)
            .map(|(_, v)| v.clone())
    };
    let extra = opt("--kubelet-extra-args").unwrap_or_default();
    // `--service-ipv6-cidr` makes the family IPv6 (it refuses `--ip-family ipv4` with it).
    let v6 = opt("--service-ipv6-cidr");
    let dns = opt("--dns-cluster-ip")
        .or_else(|| v6.as_deref().map(cluster_dns))
        .or_else(|| opt("--service-ipv4-cidr").map(|c| cluster_dns(&c)))
        .unwrap_or_else(|| "10.100.0.10".into());
    let c = config
        .as_object_mut()
        .expect("kubelet-config.json is an object");
    c.insert("clusterDNS".into(), json!([dns]));
    c.insert("evictionHard".into(), eviction_hard());
    c.insert("kubeReserved".into(), kube_reserved(inst));
    if opt("--use-max-pods").as_deref() != Some("false") {
        c.insert("maxPods".into(), inst.eni_max_pods.into());
    }
    c.insert(
        "providerID".into(),
        format!("aws:///{}/{}", inst.zone, inst.id).into(),
    );
    c.insert("cgroupDriver".into(), "systemd".into());
    if !extra.contains("--reserved-cpus") {
        c.insert("systemReservedCgroup".into(), "/system".into());
        c.insert("kubeReservedCgroup".into(), "/runtime".into());
    }
    split_ascii_whitespace(&extra)
}

/// How systemd splits an unquoted `$VAR` in ExecStart: on ASCII whitespace only.
pub fn split_ascii_whitespace(s: &str) -> Vec<String> {
    s.split([' ', '\t', '\n', '\r', '\x0b', '\x0c'])
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect()
}

/// nodeadm's merge of `docs` (NodeConfigs, in the order it reads them).
pub fn nodeadm_merge(docs: &[Value]) -> Value {
    let mut out = json!({});
    for d in docs {
        merge_node_config(&mut out, d, "");
    }
    out
}

fn merge_node_config(dst: &mut Value, src: &Value, path: &str) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                let p = format!("{path}.{k}");
                let slot = d.entry(k.clone()).or_insert(Value::Null);
                if p == ".spec.kubelet.flags" {
                    let mut all = slot.as_array().cloned().unwrap_or_default();
                    all.extend(v.as_array().cloned().unwrap_or_default());
                    *slot = Value::Array(all);
                } else if slot.is_object() && v.is_object() {
                    merge_node_config(slot, v, &p);
                } else if !is_empty(v) {
                    *slot = v.clone();
                }
            }
        }
        (d, s) => *d = s.clone(),
    }
}

/// What nodeadm's config phase writes to `/run/systemd/resolved.conf.d/40-eks.conf` for the
/// merged NodeConfig `nc` (internal/system/resolve.go and its template): nothing when
/// `spec.instance.network` names neither servers nor domains; else `[Resolve]`, a line with
/// `DNS=` and the servers joined by single spaces (empty without servers), the same for
/// `Domains=`, each line ended by a newline.
pub fn nodeadm_resolve_file(nc: &Value) -> Option<String> {
    let words = |k: &str| -> Vec<String> {
        nc["spec"]["instance"]["network"][k]
            .as_array()
            .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    let (servers, domains) = (words("nameservers"), words("domains"));
    if servers.is_empty() && domains.is_empty() {
        return None;
    }
    let line = |key: &str, v: &[String]| match v.is_empty() {
        true => String::new(),
        false => format!("{key}={}", v.join(" ")),
    };
    Some(format!(
        "[Resolve]\n{}\n{}\n",
        line("DNS", &servers),
        line("Domains", &domains)
    ))
}

/// mergo's "empty": a value that does not override.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    }
}

/// What nodeadm starts the kubelet with for the merged NodeConfig `nc`: its generated config
/// (the fields that shape the Node), the merged `kubelet.config` as a drop-in, the merged flags.
pub fn al2023_nodeadm(nc: &Value, inst: &Instance) -> Start {
    let spec = &nc["spec"];
    let cidr = spec["cluster"]["cidr"].as_str().unwrap_or("10.100.0.0/16");
    let config = json!({
        "kind": "KubeletConfiguration",
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "address": "0.0.0.0",
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true, "cacheTTL": "2m0s"},
            "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}
        },
        "authorization": {"mode": "Webhook", "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"}},
        "cgroupDriver": "systemd",
        "cgroupRoot": "/",
        "clusterDNS": [cluster_dns(cidr)],
        "clusterDomain": "cluster.local",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "evictionHard": eviction_hard(),
        "featureGates": {"RotateKubeletServerCertificate": true},
        "hairpinMode": "hairpin-veth",
        "logging": {"verbosity": 2},
        "protectKernelDefaults": true,
        "readOnlyPort": 0,
        "serializeImagePulls": false,
        "serverTLSBootstrap": true,
        "providerID": format!("aws:///{}/{}", inst.zone, inst.id),
        "kubeReservedCgroup": "/runtime",
        "maxPods": inst.eni_max_pods,
        "kubeReserved": kube_reserved(inst),
    });
    let mut dropins = Vec::new();
    if let Some(user) = spec["kubelet"]["config"]
        .as_object()
        .filter(|o| !o.is_empty())
    {
        let mut doc =
            json!({"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1"});
        doc.as_object_mut().unwrap().extend(user.clone());
        dropins.push(("40-nodeadm.conf".to_string(), doc));
    }
    let flags = spec["kubelet"]["flags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect();
    Start {
        config,
        dropins,
        flags,
    }
}
