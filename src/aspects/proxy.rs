//! The HTTP proxy (`proxy`): one systemd drop-in per unit that fetches at boot, holding
//! `HTTP(S)_PROXY` and the computed `NO_PROXY` in upper and lower case, then systemd told to
//! reload its units (D-Bus `Manager.Reload`) before any of them starts. containerd and kubelet on
//! both families; `sandbox-image.service` on AL2 (it pulls the pause image from ECR);
//! `nodeadm-config.service` and `nodeadm-run.service` on AL2023 (nodeadm calls EC2); the
//! launch-hook unit when the agent completes a hook. The drop-ins are mode 0600: a proxy URL's
//! credentials are secrets, redacted in every rendering.

use crate::facts::Family;
use crate::spec::proxy::{is_cidr, NoProxyInputs, ProxySpec};
use crate::spec::Spec;
use crate::step::Step;
use crate::text::printable;

use super::{Aspect, Input, Out, Reads};

pub(crate) const ASPECT: Aspect = Aspect {
    name: "proxy",
    reads,
    plan,
};

/// The drop-in's file name in each unit's `.d` directory.
pub const DROPIN: &str = "60-eks-nodeinit-proxy.conf";

/// The units of `family` that fetch over the network at boot.
fn units(spec: &Spec, family: Family) -> Vec<&'static str> {
    let mut u = vec!["containerd.service", "kubelet.service"];
    match family {
        Family::Al2 => u.push("sandbox-image.service"),
        Family::Al2023 => u.extend(["nodeadm-config.service", "nodeadm-run.service"]),
    }
    if spec.launch_hook.is_some() {
        u.push("eks-nodeinit-launch-hook.service");
    }
    u
}

pub fn dropin(unit: &str) -> String {
    format!("/etc/systemd/system/{unit}.d/{DROPIN}")
}

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if spec.proxy.is_none() {
        return;
    }
    let families = match family {
        Some(f) => vec![f],
        None => vec![Family::Al2, Family::Al2023],
    };
    for f in families {
        for u in units(spec, f) {
            r.file(dropin(u));
        }
    }
}

/// systemd reads `%` as a specifier in `Environment=`: written `%%`.
fn unit_escaped(v: &str) -> String {
    v.replace('%', "%%")
}

/// The drop-in: each variable in upper and lower case (Go reads the upper first, curl and many
/// tools only the lower), in double quotes (the values hold no quote, backslash or space: the
/// spec checked them).
pub fn render(p: &ProxySpec, no_proxy: &[String]) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit from its config's `proxy` (docs/private-networks.md).\n[Service]\n",
    );
    let mut var = |name: &str, value: &str| {
        let v = unit_escaped(value);
        s.push_str(&format!(
            "Environment=\"{name}={v}\" \"{}={v}\"\n",
            name.to_ascii_lowercase()
        ));
    };
    if let Some(u) = &p.https {
        var("HTTPS_PROXY", &u.url);
    }
    if let Some(u) = &p.http {
        var("HTTP_PROXY", &u.url);
    }
    var("NO_PROXY", &no_proxy.join(","));
    s
}

/// The NO_PROXY for this node, with a warning for each input it lacks.
fn no_proxy(i: &Input, p: &ProxySpec, out: &mut Out) -> Vec<String> {
    let md = i.facts.instance.as_ref();
    let region = md.map_or("", |m| m.region.as_str());
    let vpc: Vec<String> = match md.and_then(|m| m.vpc_cidr_blocks.as_ref()) {
        Some(blocks) => {
            for b in blocks.iter().filter(|b| !is_cidr(b)) {
                out.warnings.push(format!(
                    "proxy: `{}` from the VPC's CIDR blocks is no CIDR block: left out of NO_PROXY",
                    printable(b)
                ));
            }
            blocks.clone()
        }
        None => {
            out.warnings.push("proxy: the VPC's CIDR blocks are not known (IMDS serves no network/interfaces/macs/<mac>/vpc-ipv4-cidr-blocks, or the metadata file has no vpcCidrBlocks): NO_PROXY lacks them, so kubelet's probes and traffic to the VPC go through the proxy; add them to proxy.noProxy".into());
            Vec::new()
        }
    };
    let cluster = i.facts.cluster(i.spec);
    let cidr = cluster.cidr.as_ref().map(|c| c.text.clone());
    if cidr.is_none() {
        out.warnings.push("proxy: the cluster's service CIDR is not known (cluster.cidr, or discovery): NO_PROXY lacks it; add it to proxy.noProxy".into());
    }
    p.no_proxy_list(NoProxyInputs {
        region,
        vpc_cidrs: &vpc,
        service_cidr: cidr.as_deref(),
    })
}

fn plan(i: &Input, out: &mut Out) {
    let (Some(p), Some(family)) = (&i.spec.proxy, i.facts.family()) else {
        return;
    };
    let list = no_proxy(i, p, out);
    let text = render(p, &list);
    for s in p.secrets() {
        out.secrets.push(format!("{}@", unit_escaped(&s)));
        out.secrets.push(format!("{s}@"));
    }
    let mut wrote = false;
    for unit in units(i.spec, family) {
        let path = dropin(unit);
        let Some(cur) = i.facts.current_file(&path, "proxy", &mut out.findings) else {
            continue;
        };
        if let Some(mode) = cur
            .mode
            .filter(|m| *m & 0o077 != 0 && !p.secrets().is_empty())
        {
            out.findings.push("proxy", format!("{path} exists with mode {mode:04o} and would hold the proxy's credentials: the agent keeps a file's mode, so remove it or make it 0600"));
            continue;
        }
        if cur.content.as_deref() == Some(text.as_str()) {
            continue;
        }
        out.steps.push(Step::File {
            purpose: format!("proxy environment for {unit}"),
            path: path.into(),
            old: cur.content,
            new: text.clone(),
            mode: 0o600,
            backup: None,
        });
        wrote = true;
    }
    if wrote {
        out.steps.push(Step::ReloadUnits {
            why: "the proxy drop-ins apply to units started after a reload".into(),
        });
    }
}

#[cfg(test)]
mod tests;
