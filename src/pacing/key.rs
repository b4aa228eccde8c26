use std::borrow::Cow;

use reqwest::header::HeaderName;

use crate::limiter::digest::sha256_hex;

/// What joins the parts of a key made with [`PartitionKey::and`]: U+001F, the ASCII unit
/// separator. No part the crate's keys produce can hold it (a header value cannot, nor a
/// host, nor a URL path, which percent-encodes control characters), so two pairs of parts
/// never make the same key.
const SEPARATOR: char = '\u{1f}';

/// Which quota a request counts against: the pacer keeps one queue, one bucket and one learned
/// quota per partition key.
///
/// # A partition is what the server counts together
///
/// A partition says whose requests they are (a tenant, a route group); the server's quota
/// may be wider. A quota stated "per API key" covers every route and every tenant served with
/// that key; GitHub's core quota, for one, counts every request of a token, whatever the
/// repository or route, while its search routes have a quota of their own. When the answers
/// show partitions sharing one quota (one `pk`, or one counter falling across them, in fixed
/// windows), [`PacingMiddleware`](super::PacingMiddleware) paces them as one, taking turns
/// (the rule is in the [module docs](super)). Where the answers cannot show it (a quota
/// stated with a reset that moves with every request and no `pk`, or no quota stated at
/// all), each partition learns its quota on its own, and a quota split over three partitions
/// is spent three times over. The partition to choose, to be sure:
///
/// | the server counts | partition |
/// |---|---|
/// | per API key, and the client uses one key per host (most partner APIs) | [`PerHost`], the default |
/// | per tenant: each tenant's requests carry its own key or token | `PerHeader::new("x-tenant").and(PerHost)` |
/// | some routes apart (GitHub: search apart from core) | `PerHost.and(PerPathPrefix::new(["/search/"]))` |
///
/// Partitioning per tenant on a server that counts per API key is fine where the answers
/// show the shared quota: it costs a request or two per partition until they do, and buys
/// each tenant its turn.
///
/// # Keys of your own, and keys together
///
/// Any `Fn(&reqwest::Request) -> String` is a partition key, and [`and`](PartitionKey::and)
/// joins two keys into one, so a tenant taken from the URL, with the host, is one line:
///
/// ```
/// use reqwest_polite::pacing::{PartitionKey, PerHost};
///
/// let tenant_in_path = |request: &reqwest::Request| {
///     let mut segments = request.url().path_segments().into_iter().flatten();
///     segments.nth(1).unwrap_or_default().to_owned() // /tenants/{tenant}/...
/// };
/// let by_tenant_and_host = tenant_in_path.and(PerHost);
///
/// let request = reqwest::Client::new()
///     .get("https://api.example.com/tenants/acme/orders")
///     .build()
///     .unwrap();
/// assert_eq!(by_tenant_and_host.key_of(&request), "acme\u{1f}api.example.com:443");
/// ```
pub trait PartitionKey: Send + Sync + 'static {
    /// The partition key of `request`. It may hold secrets (API keys): the pacer never logs it
    /// in clear, and the Redis limiter hashes it before it becomes part of a Redis key.
    fn key_of(&self, request: &reqwest::Request) -> String;

    /// This key and `other` together: requests share a partition when both keys agree. The
    /// key is this key's, U+001F (the ASCII unit separator, which no header value, host or
    /// URL path contains), then `other`'s. A key of your own that may contain U+001F could
    /// make the same key as another pair of parts.
    ///
    /// ```
    /// use reqwest_polite::pacing::{PartitionKey, PerHeader, PerHost};
    ///
    /// let by_tenant_and_host = PerHeader::new("x-tenant").and(PerHost);
    ///
    /// let request = reqwest::Client::new()
    ///     .get("https://api.example.com/v1/items")
    ///     .header("x-tenant", "acme")
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(by_tenant_and_host.key_of(&request), "acme\u{1f}api.example.com:443");
    /// ```
    fn and<K: PartitionKey>(self, other: K) -> Both<Self, K>
    where
        Self: Sized,
    {
        Both {
            first: self,
            second: other,
        }
    }
}

impl<F> PartitionKey for F
where
    F: Fn(&reqwest::Request) -> String + Send + Sync + 'static,
{
    fn key_of(&self, request: &reqwest::Request) -> String {
        self(request)
    }
}

/// The default partition: one quota per host and port (`api.example.com:443`).
///
/// ```
/// use reqwest_polite::pacing::{PartitionKey, PerHost};
///
/// let request = reqwest::Client::new()
///     .get("https://api.example.com/v1/items?page=2")
///     .build()
///     .unwrap();
/// assert_eq!(PerHost.key_of(&request), "api.example.com:443");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PerHost;

impl PartitionKey for PerHost {
    fn key_of(&self, request: &reqwest::Request) -> String {
        let url = request.url();
        let host = url.host_str().unwrap_or_default();
        match url.port_or_known_default() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        }
    }
}

/// One quota per value of a request header: a tenant, an API key, a user. Usually joined
/// with the host ([`PartitionKey::and`]), so that two APIs do not share a partition.
///
/// The key is the header's first value (a value that is not UTF-8 is read lossily, each
/// invalid sequence as U+FFFD); a request without the header has the empty key, as one
/// whose value is empty.
///
/// ```
/// use reqwest_polite::pacing::{PartitionKey, PerHeader};
///
/// let by_tenant = PerHeader::new("X-Tenant"); // names are case-insensitive
/// let client = reqwest::Client::new();
///
/// let acme = client.get("https://api.example.com/").header("x-tenant", "acme");
/// assert_eq!(by_tenant.key_of(&acme.build().unwrap()), "acme");
/// let nobody = client.get("https://api.example.com/");
/// assert_eq!(by_tenant.key_of(&nobody.build().unwrap()), "");
/// ```
#[derive(Debug, Clone)]
pub struct PerHeader {
    name: HeaderName,
}

impl PerHeader {
    /// Partitions by the value of the header `name`, in any case.
    ///
    /// # Panics
    ///
    /// When `name` is not a header name (empty, or with a space, a colon or another
    /// character a header name cannot hold): a key that no request could match is a mistake
    /// better found when the client is built.
    pub fn new(name: &str) -> PerHeader {
        match HeaderName::from_bytes(name.as_bytes()) {
            Ok(name) => PerHeader { name },
            Err(_) => panic!("{name:?} is not an HTTP header name"),
        }
    }
}

impl PartitionKey for PerHeader {
    fn key_of(&self, request: &reqwest::Request) -> String {
        match request.headers().get(&self.name) {
            Some(value) => String::from_utf8_lossy(value.as_bytes()).into_owned(),
            None => String::new(),
        }
    }
}

/// One quota per group of routes the server counts apart, named by a path prefix; every
/// other path shares one partition. The key is the longest prefix the request's path starts
/// with (compared as text: `/search` would match `/searches` too, `/search/` would not), or
/// the empty key when none does.
///
/// GitHub's search routes have a quota of their own beside the core quota of every other
/// route, and code search one of its own again:
///
/// ```
/// use reqwest_polite::pacing::{PartitionKey, PerHost, PerPathPrefix};
///
/// let github = PerHost.and(PerPathPrefix::new(["/search/", "/search/code"]));
/// let key = |url: &str| github.key_of(&reqwest::Client::new().get(url).build().unwrap());
///
/// assert_eq!(key("https://api.github.com/repos/o/r/issues"), "api.github.com:443\u{1f}");
/// assert_eq!(key("https://api.github.com/users/o"), "api.github.com:443\u{1f}");
/// assert_eq!(key("https://api.github.com/search/issues?q=x"), "api.github.com:443\u{1f}/search/");
/// assert_eq!(key("https://api.github.com/search/code?q=x"), "api.github.com:443\u{1f}/search/code");
/// ```
#[derive(Debug, Clone)]
pub struct PerPathPrefix {
    /// Longest first, so that the first match is the longest.
    prefixes: Vec<Cow<'static, str>>,
}

impl PerPathPrefix {
    /// Partitions by the longest of `prefixes` each request's path starts with.
    pub fn new<P>(prefixes: impl IntoIterator<Item = P>) -> PerPathPrefix
    where
        P: Into<Cow<'static, str>>,
    {
        let mut prefixes: Vec<Cow<'static, str>> = prefixes.into_iter().map(Into::into).collect();
        prefixes.sort_by_key(|prefix| std::cmp::Reverse(prefix.len()));
        PerPathPrefix { prefixes }
    }
}

impl PartitionKey for PerPathPrefix {
    fn key_of(&self, request: &reqwest::Request) -> String {
        let path = request.url().path();
        self.prefixes
            .iter()
            .find(|prefix| path.starts_with(prefix.as_ref()))
            .map(|prefix| prefix.clone().into_owned())
            .unwrap_or_default()
    }
}

/// Two partition keys together, made by [`PartitionKey::and`]: requests share a partition
/// when both keys agree.
#[derive(Debug, Clone, Copy, Default)]
pub struct Both<A, B> {
    first: A,
    second: B,
}

impl<A: PartitionKey, B: PartitionKey> PartitionKey for Both<A, B> {
    fn key_of(&self, request: &reqwest::Request) -> String {
        let mut key = self.first.key_of(request);
        key.push(SEPARATOR);
        key.push_str(&self.second.key_of(request));
        key
    }
}

/// A short digest of a key, fit for logs: tells keys apart without revealing them.
pub(crate) fn key_digest(key: &str) -> String {
    sha256_hex(&[key.as_bytes()], 12)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(url: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().get(url)
    }

    fn key(partition: &impl PartitionKey, request: reqwest::RequestBuilder) -> String {
        partition.key_of(&request.build().unwrap())
    }

    #[test]
    fn per_host_names_the_port_known_or_given() {
        assert_eq!(
            key(&PerHost, get("https://api.example.com/x")),
            "api.example.com:443"
        );
        assert_eq!(
            key(&PerHost, get("http://api.example.com/x")),
            "api.example.com:80"
        );
        assert_eq!(
            key(&PerHost, get("http://127.0.0.1:8080/x")),
            "127.0.0.1:8080"
        );
    }

    #[test]
    fn per_header_reads_the_first_value_in_any_case() {
        let tenant = PerHeader::new("X-Tenant");
        let twice = get("http://h/")
            .header("x-tenant", "acme")
            .header("x-tenant", "globex");
        assert_eq!(key(&tenant, twice), "acme");
        assert_eq!(
            key(&tenant, get("http://h/").header("X-TENANT", "a b")),
            "a b"
        );
        assert_eq!(key(&tenant, get("http://h/")), "");
        assert_eq!(key(&tenant, get("http://h/").header("x-tenant", "")), "");
    }

    #[test]
    fn per_header_reads_a_value_that_is_not_utf8_lossily() {
        let value = reqwest::header::HeaderValue::from_bytes(b"caf\xe9").unwrap();
        let request = get("http://h/").header("x-tenant", value);
        assert_eq!(key(&PerHeader::new("x-tenant"), request), "caf\u{fffd}");
    }

    #[test]
    #[should_panic(expected = "is not an HTTP header name")]
    fn per_header_refuses_a_name_no_header_can_have() {
        PerHeader::new("x tenant");
    }

    #[test]
    fn per_path_prefix_takes_the_longest_match_whatever_the_order() {
        let routes = PerPathPrefix::new(["/search/", "/search/code", "/graphql"]);
        let cases = [
            ("http://h/search/code?q=1", "/search/code"),
            ("http://h/search/codes", "/search/code"),
            ("http://h/search/issues", "/search/"),
            ("http://h/search", ""),
            ("http://h/graphql", "/graphql"),
            ("http://h/repos/o/r", ""),
            ("http://h/", ""),
        ];
        for (url, expected) in cases {
            assert_eq!(key(&routes, get(url)), expected, "{url}");
        }
        let owned = PerPathPrefix::new(vec![String::from("/a")]);
        assert_eq!(key(&owned, get("http://h/a/b")), "/a");
    }

    #[test]
    fn keys_together_are_joined_by_the_unit_separator() {
        let both = PerHeader::new("x-tenant").and(PerHost);
        let request = get("https://api.example.com/").header("x-tenant", "acme");
        assert_eq!(key(&both, request), "acme\u{1f}api.example.com:443");
        // Joined left to right however they are grouped.
        let path = |r: &reqwest::Request| r.url().path().to_owned();
        let left = PerHeader::new("x-tenant").and(PerHost).and(path);
        let right = PerHeader::new("x-tenant").and(PerHost.and(path));
        let request = || get("http://h:81/p").header("x-tenant", "t");
        assert_eq!(key(&left, request()), "t\u{1f}h:81\u{1f}/p");
        assert_eq!(key(&left, request()), key(&right, request()));
    }

    #[test]
    fn no_two_pairs_of_parts_make_one_key() {
        // A separator a part could hold would make ("a|b", "c") and ("a", "b|c") one key.
        let by_two_headers = PerHeader::new("x-a").and(PerHeader::new("x-b"));
        let pair = |a: &str, b: &str| {
            key(
                &by_two_headers,
                get("http://h/").header("x-a", a).header("x-b", b),
            )
        };
        assert_ne!(pair("a|b", "c"), pair("a", "b|c"));
        assert_ne!(pair("a:b", "c"), pair("a", "b:c"));
        assert_ne!(pair("", "a"), pair("a", ""));
        // No header value can hold the separator.
        assert!(reqwest::header::HeaderValue::from_str("a\u{1f}b").is_err());
        // Nor a URL's host or path.
        let url = reqwest::Url::parse("http://h/a\u{1f}b").unwrap();
        assert!(!url.path().contains(SEPARATOR), "{}", url.path());
        assert!(reqwest::Url::parse("http://a\u{1f}b/").is_err());
    }

    #[test]
    fn a_closure_composes_with_the_keys_of_the_crate() {
        let tenant = |r: &reqwest::Request| r.url().query().unwrap_or_default().to_owned();
        let both = tenant.and(PerHost);
        assert_eq!(key(&both, get("http://h/?acme")), "acme\u{1f}h:80");
        // A composed key is still a key the pacing middleware can hold.
        let _: std::sync::Arc<dyn PartitionKey> = std::sync::Arc::new(both);
    }
}
