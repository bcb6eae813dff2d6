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
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

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
        let proxy = self.context.proxy_for(&self.url);
        let tcp = net::open(&self.url, proxy).await?;
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
                b = b.header("content-type", "application/json");
                Bytes::from(v.to_string())
            }
            None => Bytes::new(),
        };
        let req = b
            .body(Full::new(bytes))
            .map_err(|e| Cause::new("http", e.to_string()))?;
        let (status, body) = net::request(tls, req).await?;
        Ok(Answer { status, body })
    }

    /// `GET /readyz` without credentials: `ok`, or the cause.
    pub async fn readyz(&self) -> Result<String, Cause> {
        let a = self.call("GET", "/readyz", None, None).await?;
        let text = String::from_utf8_lossy(&a.body);
        match a.status {
            200 => Ok(format!("/readyz: {}", printable(text.trim()))),
            401 | 403 => Err(Cause::new("readyz", format!("/readyz answered {} without credentials: EKS serves it to anyone (system:public-info-viewer); is this an EKS API server?", a.status))),
            s => Err(Cause::new("readyz", format!("/readyz answered {s}: {}", escaped(&text)))),
        }
    }

    /// Who the API server says the bearer of `token` is: (username, groups).
    pub async fn whoami(&self, token: &str) -> Result<(String, Vec<String>), Cause> {
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
        match a.status {
            200 | 201 => {}
            401 => return Err(Cause::new("unauthenticated", "the API server refused the node's token (401 Unauthorized): its role is not mapped to a Kubernetes identity".into())),
            s => return Err(Cause::new("http", format!("SelfSubjectReview answered {s}: {}", escaped(&String::from_utf8_lossy(&a.body))))),
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
}
