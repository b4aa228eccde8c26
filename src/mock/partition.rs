use http::HeaderName;
use wiremock::Request;

/// The partition key given to requests that lack the header their layer partitions by, so
/// they share one quota (as an anonymous tier would).
pub const ANONYMOUS_KEY: &str = "anonymous";

/// Which quota a request counts against: the key a [`Layer`](super::Layer) asks its limiter
/// about.
///
/// Keys are kept **as given** (an API key in clear, say): the mock is for tests, and tests
/// want to read them back from the [request log](super::RequestLog). A Redis-backed layer
/// (feature `redis`) still hashes them before they reach Redis, as the Redis limiters always
/// do.
///
/// ```
/// use reqwest_polite::mock::Partition;
/// use wiremock::Request;
/// use wiremock::http::{HeaderMap, Method};
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "203.0.113.7, 10.0.0.1".parse().unwrap());
/// let request = Request {
///     url: "http://localhost/orders".parse().unwrap(),
///     method: Method::POST,
///     headers,
///     body: Vec::new(),
/// };
///
/// assert_eq!(Partition::ClientIp.key(&request), "203.0.113.7");
/// assert_eq!(Partition::ApiKey.key(&request), "anonymous");
/// assert_eq!(Partition::Route.key(&request), "POST /orders");
/// assert_eq!(Partition::Global.key(&request), "global");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Partition {
    /// One quota for every request: the key is `"global"`.
    Global,
    /// One quota per client address: the first element of `X-Forwarded-For`, trimmed (the
    /// original client, as proxies append). Wiremock does not tell the peer address, so a
    /// request without the header gets [`ANONYMOUS_KEY`].
    ClientIp,
    /// One quota per `X-API-Key` value; [`ANONYMOUS_KEY`] without one.
    ApiKey,
    /// One quota per route: the key is the method and the path, like `"POST /orders"`.
    Route,
    /// One quota per value of this header (a tenant id, say); [`ANONYMOUS_KEY`] without one.
    Header(HeaderName),
}

impl Partition {
    /// The partition key of `request`: never empty, and [`ANONYMOUS_KEY`] when the header it
    /// needs is missing, empty, or not visible ASCII.
    pub fn key(&self, request: &Request) -> String {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let given = match self {
            Partition::Global => return "global".to_owned(),
            Partition::Route => return format!("{} {}", request.method, request.url.path()),
            Partition::ClientIp => header("x-forwarded-for")
                .and_then(|list| list.split(',').next().map(|first| first.trim().to_owned())),
            Partition::ApiKey => header("x-api-key").map(|key| key.trim().to_owned()),
            Partition::Header(name) => header(name.as_str()).map(|value| value.trim().to_owned()),
        };
        given
            .filter(|key| !key.is_empty())
            .unwrap_or_else(|| ANONYMOUS_KEY.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::http::{HeaderMap, HeaderValue, Method};

    fn request(headers: &[(&str, &[u8])]) -> Request {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        Request {
            url: "http://localhost/items/7?page=2".parse().unwrap(),
            method: Method::GET,
            headers: map,
            body: Vec::new(),
        }
    }

    #[test]
    fn client_ip_is_the_first_forwarded_address() {
        let req = request(&[("x-forwarded-for", b" 198.51.100.4 ,10.0.0.1, 10.0.0.2")]);
        assert_eq!(Partition::ClientIp.key(&req), "198.51.100.4");
    }

    #[test]
    fn missing_empty_or_opaque_headers_fall_back_to_anonymous() {
        let cases: [&[(&str, &[u8])]; 4] = [
            &[],
            &[("x-forwarded-for", b" , 10.0.0.1")],
            &[("x-api-key", b"   ")],
            &[("x-api-key", b"\xff\xfe"), ("x-forwarded-for", b"\xff")],
        ];
        for headers in cases {
            let req = request(headers);
            assert_eq!(Partition::ClientIp.key(&req), ANONYMOUS_KEY);
            assert_eq!(Partition::ApiKey.key(&req), ANONYMOUS_KEY);
        }
    }

    #[test]
    fn api_keys_and_custom_headers_are_kept_as_given() {
        let req = request(&[("x-api-key", b"sk_live_123"), ("x-tenant", b"acme")]);
        assert_eq!(Partition::ApiKey.key(&req), "sk_live_123");
        let tenant = Partition::Header(HeaderName::from_static("x-tenant"));
        assert_eq!(tenant.key(&req), "acme");
    }

    #[test]
    fn route_key_is_method_and_path_without_query() {
        assert_eq!(Partition::Route.key(&request(&[])), "GET /items/7");
    }
}
