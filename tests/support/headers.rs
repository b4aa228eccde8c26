//! Header maps for parser tests.

use http::{HeaderMap, HeaderName, HeaderValue};

/// A header map of `(name, value)` pairs, in order; a name given twice keeps both values.
///
/// Panics on a value that is not a valid header value: test data is written to be valid.
pub fn header_map(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        let value = HeaderValue::from_str(value)
            .unwrap_or_else(|err| panic!("{name}: {value:?} is not a header value: {err}"));
        headers.append(*name, value);
    }
    headers
}

/// The header map of already built fields (what `HeaderDialect::render` returns), in order.
pub fn collect_headers(fields: impl IntoIterator<Item = (HeaderName, HeaderValue)>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        headers.append(name, value);
    }
    headers
}
