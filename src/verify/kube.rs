//! The API server as the node reaches it: DNS, TCP (through the proxy unless NO_PROXY names
//! it), TLS trusting the cluster's CA alone, then HTTP. `/readyz` anonymously, a
//! `SelfSubjectReview` and the node's own Node with its EKS token.

use bytes::Bytes;
use http_body_util::Full;

use super::net::{self, Url};
use super::{Cause, Context};
use crate::base::text::{escaped, printable};

/// How to reach the API server: its URL and the cluster's CA.
pub struct ApiServer<'a> {
    pub url: Url,
    pub context: &'a Context,
}

/// What one call returned.
pub type Answer = net::Reply;

impl<'a> ApiServer<'a> {
    pub fn of(context: &'a Context) -> Result<ApiServer<'a>, Cause> {
        let url = Url::parse(&context.endpoint)
            .filter(|u| u.tls)
            .ok_or_else(|| {
                Cause::new(
                    "tls",
                    format!("`{}` is not an https:// URL", printable(&context.endpoint)),
                )
            })?;
        if crate::base::pem::ders(&context.ca_pem)
            .unwrap_or_default()
            .is_empty()
        {
            return Err(Cause::new(
                "tls-untrusted",
                "cluster.certificateAuthority holds no PEM certificate: nothing would be trusted"
                    .into(),
            ));
        }
        Ok(ApiServer { url, context })
    }

    /// A request to `path` with `token` (none: anonymous), a JSON body for a POST.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, Cause> {
        self.call_as(method, path, token, body, "application/json")
            .await
    }

    /// [`Self::call`] with the body's content type (a patch's kind).
    pub async fn call_as(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&serde_json::Value>,
        content_type: &str,
    ) -> Result<Answer, Cause> {
        let proxy = self.context.proxy_for(&self.url);
        let tcp = net::open(&self.url, proxy, &self.context.bundles()).await?;
        let roots = net::roots(&[self.context.ca_pem.as_str()], false);
        let tls = net::tls(tcp, &self.url.host, roots).await?;
        let mut b = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.url.authority())
            .header("accept", "application/json")
            .header(
                "user-agent",
                concat!("eks-nodeinit/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let bytes = match body {
            Some(v) => {
                b = b.header("content-type", content_type);
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let req = b
            .body(Full::new(bytes))
            .map_err(|e| Cause::new("http", e.to_string()))?;
        net::request(tls, req).await
    }

    /// `GET /readyz` without credentials: `ok`, or the cause.
    pub async fn readyz(&self) -> Result<String, Cause> {
        let a = self.call("GET", "/readyz", None, None).await?;
        let text = String::from_utf8_lossy(&a.body);
        match a.status {
            200 => Ok(format!("/readyz: {}", printable(text.trim()))),
            401 | 403 => Err(Cause::new("readyz", format!("/readyz answered {} without credentials: EKS serves it to anyone (system:public-info-viewer); is this an EKS API server?", a.status))),
            s @ (429 | 500..=599) => Err(Cause::new("unavailable", format!("/readyz answered {s}: {}", escaped(&text)))),
            s => Err(Cause::new("readyz", format!("/readyz answered {s}: {}", escaped(&text)))),
        }
    }

    /// Who the API server says the bearer of `token` (made from `role`'s credentials) is:
    /// (username, groups).
    pub async fn whoami(&self, token: &str, role: &str) -> Result<(String, Vec<String>), Cause> {
        let body = serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
        });
        let a = self
            .call(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                Some(token),
                Some(&body),
            )
            .await?;
        let text = || escaped(&String::from_utf8_lossy(&a.body));
        match a.status {
            200 | 201 => {}
            401 => return Err(refused(self.context, role, a.date.as_deref())),
            404 => return Err(Cause::new("no-review", "the API server has no authentication.k8s.io/v1 SelfSubjectReview (Kubernetes before 1.28): the identity is proven after the hand-off instead".into())),
            s @ (429 | 500..=599) => return Err(Cause::new("unavailable", format!("SelfSubjectReview answered {s}: {}", text()))),
            s => return Err(Cause::new("http", format!("SelfSubjectReview answered {s}: {}", text()))),
        }
        let v: serde_json::Value = serde_json::from_slice(&a.body)
            .map_err(|_| Cause::new("http", "SelfSubjectReview's answer is not JSON".into()))?;
        let user = &v["status"]["userInfo"];
        let name = user["username"].as_str().unwrap_or_default().to_string();
        let groups = user["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Ok((name, groups))
    }
}

/// How far the node's clock may be from the API server's before a refused token is put down
/// to it (aws-iam-authenticator takes a token for 15 minutes from its `X-Amz-Date`).
const SKEW: u64 = 14 * 60;

/// A 401 for the node's token, named as well as the node can: the clock against the API
/// server's `Date`, else the role to map, the cluster the token names, and what else refuses a
/// token alike (the authenticator says only 401).
pub fn refused(ctx: &Context, role: &str, server_date: Option<&str>) -> Cause {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if let Some(server) = server_date.and_then(http_date) {
        let (d, how) = match now >= server {
            true => (now - server, "ahead of"),
            false => (server - now, "behind"),
        };
        if d > SKEW {
            return Cause::new("clock-skew", format!("the API server refused the node's token (401), and the node's clock is {d} s {how} the API server's (its Date header): a token is valid for 15 minutes from the time the node signs it"));
        }
    }
    Cause::new(
        "unauthenticated",
        format!(
            "the API server refused the node's token (401 Unauthorized) for the role `{}`: the role is not mapped, or the token names another cluster than the API server's authenticator serves (x-k8s-aws-id `{}`), or the account's regional STS endpoint in {} is deactivated",
            printable(role),
            printable(&ctx.cluster),
            printable(&ctx.region)
        ),
    )
}

/// An HTTP date (`Fri, 27 Nov 2026 06:17:56 GMT`) in seconds since the epoch.
pub fn http_date(s: &str) -> Option<u64> {
    let mut w = s.split_whitespace().skip(1);
    let day: u64 = w.next()?.parse().ok()?;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mon = w.next()?;
    let month = MONTHS.iter().position(|m| *m == mon)? as u64 + 1;
    let year: u64 = w.next()?.parse().ok()?;
    let hms: Vec<u64> = w
        .next()?
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms[..] else { return None };
    if !(1..=31).contains(&day) || !(1970..=9999).contains(&year) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm), March-based years.
    let (y, mo) = match month <= 2 {
        true => (year - 1, month + 9),
        false => (year, month - 3),
    };
    let era = y / 400;
    let yoe = y % 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

/// The identity the API server must see: `system:node:<name>` in `system:nodes`.
pub fn judge_identity(
    expect: Option<&str>,
    name: &str,
    groups: &[String],
) -> Result<String, Cause> {
    let seen = format!("{} in [{}]", printable(name), printable(&groups.join(", ")));
    if let Some(node) = expect {
        let want = format!("system:node:{node}");
        if name != want {
            return Err(Cause::new(
                "wrong-identity",
                format!("the API server sees the node as {seen}, not {want}"),
            ));
        }
    } else if !name.starts_with("system:node:") {
        return Err(Cause::new(
            "wrong-identity",
            format!("the API server sees the node as {seen}, not system:node:<name>"),
        ));
    }
    if !groups.iter().any(|g| g == "system:nodes") {
        return Err(Cause::new(
            "not-node",
            format!("the API server sees the node as {seen}, without the group system:nodes"),
        ));
    }
    Ok(format!("the API server sees {seen}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_must_be_this_node_in_system_nodes() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let n = "ip-10-0-12-34.eu-west-1.compute.internal";
        assert!(judge_identity(
            Some(n),
            &format!("system:node:{n}"),
            &g(&[
                "system:bootstrappers",
                "system:nodes",
                "system:authenticated"
            ])
        )
        .is_ok());
        let e = judge_identity(
            Some(n),
            "arn:aws:sts::123456789012:assumed-role/node/i-0",
            &g(&["system:authenticated"]),
        )
        .unwrap_err();
        assert_eq!(e.code, "wrong-identity");
        let e = judge_identity(Some(n), "system:node:other", &g(&["system:nodes"])).unwrap_err();
        assert_eq!(e.code, "wrong-identity");
        let e = judge_identity(
            Some(n),
            &format!("system:node:{n}"),
            &g(&["system:authenticated"]),
        )
        .unwrap_err();
        assert_eq!(e.code, "not-node");
    }

    #[test]
    fn http_dates_read_as_seconds_since_the_epoch() {
        assert_eq!(
            http_date("Thu, 28 May 2026 20:26:40 GMT"),
            Some(1_780_000_000)
        );
        assert_eq!(http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            http_date("Sun, 29 Feb 2032 23:59:59 GMT"),
            Some(1_961_711_999)
        );
        for bad in [
            "",
            "Thu, 28 Foo 2026 20:26:40 GMT",
            "Thu, 28 May 2026 25:00:00 GMT",
            "x 99999999999999999999 May 2026 1:2:3",
            "x 1 May 18446744073709551615 0:0:0",
            "x 31 Dec 10000 23:59:59",
        ] {
            assert_eq!(http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_refused_token_names_the_clock_else_the_role_and_cluster() {
        let ctx = Context {
            cluster: "prod".into(),
            region: "eu-west-1".into(),
            ..Context::default()
        };
        let c = refused(&ctx, "eks-node", Some("Thu, 01 Jan 2015 00:00:00 GMT"));
        assert_eq!(c.code, "clock-skew", "{c:?}");
        assert!(c.detail.contains("ahead of the API server's"), "{c:?}");
        let c = refused(&ctx, "eks-node", None);
        assert_eq!(c.code, "unauthenticated");
        assert!(
            c.detail.contains("`eks-node`") && c.detail.contains("`prod`"),
            "{c:?}"
        );
    }
}
