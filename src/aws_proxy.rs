//! The agent's AWS calls through an HTTP proxy: one SDK HTTP client per request scheme, each
//! with its proxy and the NO_PROXY rules, and a connector that hands each request to the client
//! of its scheme (the SDK's proxy setting takes one URL per client).

use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
use aws_smithy_http_client::Connector;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// The proxies for the agent's own AWS calls (the config's `proxy`): `https` for `https://`
/// endpoints (every AWS endpoint), `http` for a plain-`http://` one, neither for a host
/// `no_proxy` names (the credential chain's IMDS among them). URLs may hold credentials.
#[derive(Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Proxy {
    pub http: Option<String>,
    pub https: Option<String>,
    /// Comma-separated, as NO_PROXY.
    pub no_proxy: String,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("http", &self.http.is_some())
            .field("https", &self.https.is_some())
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

impl Proxy {
    /// The proxy a unit's environment gives (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, each name
    /// in upper case first, then lower case, as Go reads them); `None` without a proxy URL.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<Proxy> {
        let get = |upper: &str| {
            var(upper)
                .or_else(|| var(&upper.to_ascii_lowercase()))
                .filter(|v| !v.is_empty())
        };
        let p = Proxy {
            http: get("HTTP_PROXY"),
            https: get("HTTPS_PROXY"),
            no_proxy: get("NO_PROXY").unwrap_or_default(),
        };
        (p.http.is_some() || p.https.is_some()).then_some(p)
    }
}

/// The SDK HTTP client for `p`.
pub(crate) fn client(p: &Proxy) -> SharedHttpClient {
    SharedHttpClient::new(ByScheme {
        http: side(p.http.as_deref(), &p.no_proxy),
        https: side(p.https.as_deref(), &p.no_proxy),
    })
}

/// The client for one scheme's requests: through `url` unless NO_PROXY names the host; direct
/// when there is no proxy for this scheme (or its URL is not one the SDK takes: the spec checked
/// it already).
fn side(url: Option<&str>, no_proxy: &str) -> SharedHttpClient {
    let config = url
        .and_then(|u| ProxyConfig::all(u).ok())
        .map_or_else(ProxyConfig::disabled, |c| c.no_proxy(no_proxy));
    aws_smithy_http_client::Builder::new().build_with_connector_fn(move |settings, components| {
        let mut b = Connector::builder();
        b.set_connector_settings(settings.cloned());
        if let Some(c) = components {
            b.set_sleep_impl(c.sleep_impl());
        }
        b.tls_provider(Provider::Rustls(CryptoMode::AwsLc))
            .proxy_config(config.clone())
            .build()
    })
}

#[derive(Debug)]
struct ByScheme {
    http: SharedHttpClient,
    https: SharedHttpClient,
}

impl HttpClient for ByScheme {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(Dispatch {
            http: self.http.http_connector(settings, components),
            https: self.https.http_connector(settings, components),
        })
    }
}

#[derive(Debug)]
struct Dispatch {
    http: SharedHttpConnector,
    https: SharedHttpConnector,
}

impl HttpConnector for Dispatch {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        if request.uri().starts_with("http://") {
            self.http.call(request)
        } else {
            self.https.call(request)
        }
    }
}
