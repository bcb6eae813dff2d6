//! `eks-nodeinit max-pods`: the node's computation on a dev box, offline — the same functions,
//! the instance type's numbers and vCPUs from the embedded table (or given).

use super::{max_pods, reserved, Ceiling, Mode, TypeInfo};
use crate::base::text::printable;

/// What the command was asked.
#[derive(Debug, Clone)]
pub struct Question {
    pub instance_type: String,
    pub mode: Mode,
    /// The type's vCPUs: the recommended ceiling and kube-reserved's CPU depend on them.
    pub vcpus: Option<u64>,
    /// Xen, not Nitro (prefix delegation then gives secondary IPs, as the calculator does).
    pub xen: bool,
    /// The type's numbers when not taken from the table.
    pub info: Option<TypeInfo>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0} is not in the embedded instance-type table ({1} types): check the name, or give its numbers with --enis and --ipv4-per-eni (aws ec2 describe-instance-types)")]
    UnknownType(String, usize),
    #[error(
        "the recommended ceiling depends on the vCPUs, which the embedded table does not hold for {0}: give --vcpus, or --ceiling none or a number"
    )]
    NeedVcpus(String),
    #[error(
        "the VPC CNI's IPv6 mode runs only on Nitro instances (with prefix delegation), not on Xen"
    )]
    Ipv6OnXen,
    #[error("in IPv6 mode the one /80 prefix gives 2^48 addresses: without a ceiling max pods is more than kubelet takes; give --ceiling recommended or a number")]
    Ipv6WithoutCeiling,
    #[error("the VPC CNI's IPv6 mode takes neither custom networking nor a MAX_ENI (it adds no ENIs): drop --custom-networking and --max-enis")]
    Ipv6Alone,
}

/// The answer, with what it came from.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub instance_type: String,
    pub enis: u32,
    pub ipv4_per_eni: u32,
    pub source: &'static str,
    /// The vCPUs, and where they came from (`given`, `table`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vcpus_source: Option<&'static str>,
    pub max_pods: Figure,
    /// Only with the vCPUs, which the CPU share depends on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<Figure>,
}

/// One number and how it was reached, as the node's plan shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Figure {
    pub value: serde_json::Value,
    pub from: String,
}

pub fn explain(q: &Question) -> Result<Answer, ExplainError> {
    let (info, source) = match q.info {
        Some(i) => (i, "given"),
        None => match super::table::lookup(&q.instance_type) {
            Some(i) => (i, "table"),
            None => {
                return Err(ExplainError::UnknownType(
                    printable(&q.instance_type),
                    super::table::len(),
                ))
            }
        },
    };
    let (vcpus, vcpus_source) = match q.vcpus {
        Some(v) => (Some(v), Some("given")),
        None => match super::table::vcpus(&q.instance_type) {
            Some(v) => (Some(v), Some("table")),
            None => (None, None),
        },
    };
    if q.mode.ceiling == Ceiling::Recommended && vcpus.is_none() {
        return Err(ExplainError::NeedVcpus(printable(&q.instance_type)));
    }
    if q.mode.cni == super::Cni::Ipv6 && q.xen {
        return Err(ExplainError::Ipv6OnXen);
    }
    if q.mode.cni == super::Cni::Ipv6 && q.mode.ceiling == Ceiling::None {
        return Err(ExplainError::Ipv6WithoutCeiling);
    }
    if q.mode.cni == super::Cni::Ipv6 && (q.mode.custom_networking || q.mode.max_enis.is_some()) {
        return Err(ExplainError::Ipv6Alone);
    }
    let p = max_pods(info, q.mode, vcpus.unwrap_or(0), !q.xen);
    let mut from = format!("{}: {p}", p.cni.name());
    if q.mode.custom_networking {
        from.push_str("; custom networking leaves the primary ENI out");
    }
    let kube_reserved = vcpus.map(|v| {
        let r = reserved(p.value, v);
        Figure {
            value: serde_json::Value::Object(
                r.quantities()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.into()))
                    .collect(),
            ),
            from: r.to_string(),
        }
    });
    Ok(Answer {
        instance_type: printable(&q.instance_type),
        enis: info.enis,
        ipv4_per_eni: info.ipv4_per_eni,
        source,
        vcpus,
        vcpus_source,
        max_pods: Figure {
            value: p.value.into(),
            from,
        },
        kube_reserved,
    })
}

impl Answer {
    pub fn to_text(&self) -> String {
        let mut o = format!(
            "{} ({}): {} ENIs on the default network card, {} IPv4 addresses per ENI",
            self.instance_type, self.source, self.enis, self.ipv4_per_eni
        );
        match (self.vcpus, self.vcpus_source) {
            (Some(v), Some(from)) => o.push_str(&format!(", {v} vCPUs ({from})\n")),
            _ => o.push('\n'),
        }
        let m = &self.max_pods;
        o.push_str(&format!("maxPods {}: {}\n", m.value, m.from));
        match &self.kube_reserved {
            Some(r) => {
                let q: Vec<String> = r
                    .value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect();
                o.push_str(&format!("kubeReserved {}: {}\n", q.join(","), r.from));
            }
            None => o.push_str("kubeReserved: give --vcpus to derive it\n"),
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(t: &str, vcpus: Option<u64>) -> Question {
        Question {
            instance_type: t.into(),
            mode: Mode::default(),
            vcpus,
            xen: false,
            info: None,
        }
    }

    #[test]
    fn the_plan_s_arithmetic_offline() {
        let a = explain(&q("m5.large", Some(2))).unwrap();
        assert_eq!(
            a.to_text(),
            "m5.large (table): 3 ENIs on the default network card, 10 IPv4 addresses per ENI, 2 vCPUs (given)\n\
             maxPods 29: secondaryIPs: 3 ENIs × (10 − 1) + 2 = 29 (under the ceiling 110 recommended for 2 vCPUs)\n\
             kubeReserved cpu=70m,ephemeral-storage=1Gi,memory=574Mi: memory 255 + 11 × 29 = 574Mi, cpu 70m (2 vCPUs), ephemeral-storage 1Gi\n"
        );
    }

    #[test]
    fn unknown_types_and_missing_vcpus_say_what_to_give() {
        let e = explain(&q("m5.huge\u{1b}", Some(2)))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("m5.huge\\u{1b} is not in") && e.contains("--enis"),
            "{e}"
        );
        let e = explain(&q("cr1.8xlarge", None)).unwrap_err().to_string();
        assert!(
            e.contains("does not hold for cr1.8xlarge") && e.contains("--vcpus"),
            "{e}"
        );
    }

    #[test]
    fn the_tables_vcpus_serve_when_none_are_given_and_given_ones_win() {
        let a = explain(&q("m5.large", None)).unwrap();
        assert_eq!((a.vcpus, a.vcpus_source), (Some(2), Some("table")));
        assert_eq!(a.max_pods.value, 29);
        let r = a.kube_reserved.unwrap().value;
        assert_eq!(r["cpu"], "70m", "{r}");
        let v6 = Question {
            mode: Mode {
                cni: crate::base::podcap::Cni::Ipv6,
                ..Mode::default()
            },
            ..q("m5.large", None)
        };
        assert_eq!(explain(&v6).unwrap().max_pods.value, 110);
        // 96 vCPUs in the table: the high ceiling.
        let big = explain(&q("m5.24xlarge", None)).unwrap();
        assert_eq!(
            (big.vcpus, big.max_pods.value.as_u64()),
            (Some(96), Some(250))
        );
        let given = explain(&q("m5.24xlarge", Some(8))).unwrap();
        assert_eq!(
            (given.vcpus_source, given.max_pods.value.as_u64()),
            (Some("given"), Some(110))
        );
    }
}
