//! The ECR registry EKS's own images (pause, the VPC CNI, kube-proxy) come from: one account
//! in most Regions, its own in each opt-in Region and partition, as nodeadm chooses it
//! (docs.aws.amazon.com, EKS "Amazon container image registries"). A Region not listed takes
//! its partition's registry, in that partition's home Region.

/// The account of the Regions enabled by default.
const DEFAULT_ACCOUNT: &str = "602401143452";

/// Each Region with a registry of its own.
const OWN_ACCOUNTS: &[(&str, &str)] = &[
    ("af-south-1", "877085696533"),
    ("ap-east-1", "800184023465"),
    ("ap-south-2", "900889452093"),
    ("ap-southeast-3", "296578399912"),
    ("ap-southeast-4", "491585149902"),
    ("ap-southeast-5", "151610086707"),
    ("ca-west-1", "761377655185"),
    ("cn-north-1", "918309763551"),
    ("cn-northwest-1", "961992271922"),
    ("eu-central-2", "900612956339"),
    ("eu-isoe-west-1", "249663109785"),
    ("eu-south-1", "590381155156"),
    ("eu-south-2", "455263428931"),
    ("il-central-1", "066635153087"),
    ("me-central-1", "759879836304"),
    ("me-south-1", "558608220178"),
    ("us-gov-east-1", "151742754352"),
    ("us-gov-west-1", "013241004608"),
    ("us-iso-east-1", "725322719131"),
    ("us-iso-west-1", "608367168043"),
    ("us-isob-east-1", "187977181151"),
    ("us-isof-south-1", "676585237158"),
];

/// Each partition's fallback: (Region prefix, account, Region).
const PARTITIONS: &[(&str, &str, &str)] = &[
    ("us-gov-", "013241004608", "us-gov-west-1"),
    ("cn-", "961992271922", "cn-northwest-1"),
    ("us-isob-", "187977181151", "us-isob-east-1"),
    ("us-isof-", "676585237158", "us-isof-south-1"),
    ("us-iso-", "725322719131", "us-iso-east-1"),
    ("eu-isoe-", "249663109785", "eu-isoe-west-1"),
];

/// The Regions enabled by default, which share [`DEFAULT_ACCOUNT`] in their own Region.
const DEFAULT_REGIONS: &[&str] = &[
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ca-central-1",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
];

/// (account, Region) of EKS's image registry for a node in `region`.
pub fn eks_registry(region: &str) -> (&'static str, String) {
    if let Some((_, a)) = OWN_ACCOUNTS.iter().find(|(r, _)| *r == region) {
        return (a, region.to_string());
    }
    if DEFAULT_REGIONS.contains(&region) {
        return (DEFAULT_ACCOUNT, region.to_string());
    }
    match PARTITIONS.iter().find(|(p, _, _)| region.starts_with(p)) {
        Some((_, a, r)) => (a, r.to_string()),
        None => (DEFAULT_ACCOUNT, "us-west-2".into()),
    }
}

/// Each partition but the commercial one (and GovCloud, which shares its names): the prefix of
/// its Regions, its DNS suffix and its dual-stack DNS suffix, as the SDK's partition table gives
/// them (`dnsSuffix`, `dualStackDnsSuffix`).
const SUFFIXES: &[(&str, &str, &str)] = &[
    ("cn-", "amazonaws.com.cn", "api.amazonwebservices.com.cn"),
    ("eusc-", "amazonaws.eu", "api.amazonwebservices.eu"),
    ("us-isob-", "sc2s.sgov.gov", "api.aws.scloud"),
    ("us-isof-", "csp.hci.ic.gov", "api.aws.hci.ic.gov"),
    ("us-iso-", "c2s.ic.gov", "api.aws.ic.gov"),
    ("eu-isoe-", "cloud.adc-e.uk", "api.cloud-aws.adc-e.uk"),
];

/// `region`'s partition's (DNS suffix, dual-stack DNS suffix).
fn suffixes(region: &str) -> (&'static str, &'static str) {
    SUFFIXES
        .iter()
        .find(|(prefix, _, _)| region.starts_with(prefix))
        .map_or(("amazonaws.com", "api.aws"), |&(_, dns, dual)| (dns, dual))
}

/// The DNS suffix of `region`'s partition.
pub fn dns_suffix(region: &str) -> &'static str {
    suffixes(region).0
}

/// The DNS suffix of `region`'s partition for the services' dual-stack names
/// (`ec2.<region>.api.aws`).
pub fn dual_stack_suffix(region: &str) -> &'static str {
    suffixes(region).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn both_names_are_the_ones_the_sdk_resolves() {
        use aws_sdk_ec2::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
        for region in [
            "eu-west-1",
            "us-gov-west-1",
            "cn-north-1",
            "eusc-de-east-1",
            "us-iso-east-1",
            "us-isob-east-1",
            "us-isof-south-1",
            "eu-isoe-west-1",
        ] {
            for (dual, suffix) in [
                (false, dns_suffix(region)),
                (true, dual_stack_suffix(region)),
            ] {
                let p = Params::builder()
                    .region(region)
                    .use_dual_stack(dual)
                    .use_fips(false)
                    .build()
                    .unwrap();
                let e = DefaultResolver::new().resolve_endpoint(&p).await.unwrap();
                assert_eq!(
                    e.url(),
                    format!("https://ec2.{region}.{suffix}"),
                    "{region}"
                );
            }
        }
    }

    #[test]
    fn opt_in_regions_and_partitions_have_their_own_registry() {
        assert_eq!(
            eks_registry("eu-west-1"),
            ("602401143452", "eu-west-1".into())
        );
        assert_eq!(
            eks_registry("af-south-1"),
            ("877085696533", "af-south-1".into())
        );
        assert_eq!(eks_registry("me-south-1").0, "558608220178");
        assert_eq!(eks_registry("cn-north-1").0, "918309763551");
        // A Region not listed: its partition's registry, in the partition's home Region.
        assert_eq!(
            eks_registry("us-gov-south-9"),
            ("013241004608", "us-gov-west-1".into())
        );
        assert_eq!(eks_registry("us-isob-west-9").0, "187977181151");
        assert_eq!(
            eks_registry("xx-new-1"),
            ("602401143452", "us-west-2".into())
        );
        assert_eq!(dns_suffix("cn-northwest-1"), "amazonaws.com.cn");
        assert_eq!(dns_suffix("us-iso-east-1"), "c2s.ic.gov");
        assert_eq!(dns_suffix("us-gov-west-1"), "amazonaws.com");
    }
}
