//! How the agent's AWS calls reach AWS beyond the SDK's defaults: through the config's HTTP proxy
//! (one SDK HTTP client per request scheme, each with its proxy and the NO_PROXY rules, and a
//! connector that hands each request to the client of its scheme: the SDK's proxy setting takes
//! one URL per client), trusting the config's CA bundles beside the platform's roots.

use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider, TlsContext, TrustStore};
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

/// What the agent's AWS clients use beyond the SDK's defaults: a proxy, CA bundles (PEM) to trust
/// beside the platform's roots, and where the boot found IMDS and whether it takes the services'
/// dual-stack names ([`super::Endpoints`]). A client is given it as an argument: no process-wide
/// choice.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Transport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_bundles: Vec<String>,
    #[serde(default, skip_serializing_if = "super::Endpoints::is_default")]
    pub endpoints: super::Endpoints,
}

impl Transport {
    /// `t` (none: the SDK's defaults) going where `endpoints` say; `None` when it is all the
    /// SDK's defaults.
    pub fn with_endpoints(t: Option<Transport>, endpoints: super::Endpoints) -> Option<Transport> {
        let t = Transport {
            endpoints,
            ..t.unwrap_or_default()
        };
        (t != Transport::default()).then_some(t)
    }

    /// How a unit's own calls go: the proxy its environment gives (the agent's drop-in), to
    /// where `endpoints` say the boot found IMDS and with its names; `None`: the SDK's defaults.
    pub fn from_env(endpoints: super::Endpoints) -> Option<Transport> {
        let proxy = Proxy::from_env(|k| std::env::var(k).ok());
        let t = proxy.map(|p| Transport {
            proxy: Some(p),
            ..Default::default()
        });
        Transport::with_endpoints(t, endpoints)
    }

    /// Whether calls need a client of the agent's own (a proxy, CA bundles).
    pub(crate) fn needs_client(&self) -> bool {
        self.proxy.is_some() || !self.ca_bundles.is_empty()
    }
}

/// The SDK HTTP client for `t`.
pub(crate) fn client(t: &Transport) -> SharedHttpClient {
    let mut store = TrustStore::default();
    for b in &t.ca_bundles {
        store.add_pem_certificate(b.as_bytes());
    }
    let tls = TlsContext::builder()
        .with_trust_store(store)
        .build()
        .unwrap_or_default();
    let (http, https, no_proxy) = match &t.proxy {
        Some(p) => (p.http.as_deref(), p.https.as_deref(), p.no_proxy.as_str()),
        None => (None, None, ""),
    };
    SharedHttpClient::new(ByScheme {
        http: side(http, no_proxy, &tls),
        https: side(https, no_proxy, &tls),
    })
}

/// The client for one scheme's requests: through `url` unless NO_PROXY names the host; direct
/// when there is no proxy for this scheme (or its URL is not one the SDK takes: the spec checked
/// it already).
fn side(url: Option<&str>, no_proxy: &str, tls: &TlsContext) -> SharedHttpClient {
    let tls = tls.clone();
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
            .tls_context(tls.clone())
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
