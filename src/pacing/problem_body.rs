//! Reading a refusal's problem details without taking its body from the caller.

use http::Extensions;
use reqwest::{Response, ResponseBuilderExt};

use crate::headers::{PROBLEM_BODY_LIMIT, ProblemDetails};

/// `response`, with its [`ProblemDetails`] in its extensions when it is a 429 or 503 whose
/// `application/problem+json` body has a known length of at most [`PROBLEM_BODY_LIMIT`].
///
/// Any other response comes back as it came, its body unread: a stream stays a stream, and a
/// body of unknown length is never read, since a part read could not be put back. A body
/// worth reading is read whole and the response rebuilt around the same bytes, with its
/// status, version, headers, url and extensions. A body that fails to arrive is the error the
/// caller would have met reading it.
pub(crate) async fn with_problem_details(mut response: Response) -> reqwest::Result<Response> {
    let small = response
        .content_length()
        .is_some_and(|length| length <= PROBLEM_BODY_LIMIT as u64);
    if !small || !ProblemDetails::may_be_in(response.status(), response.headers()) {
        return Ok(response);
    }
    let status = response.status();
    let version = response.version();
    let mut extensions = url_extension(response.url().clone());
    let headers = std::mem::take(response.headers_mut());
    extensions.extend(std::mem::take(response.extensions_mut()));
    let body = response.bytes().await?;
    let details = ProblemDetails::from_body(status, &headers, &body);
    let mut rebuilt = http::Response::new(body);
    *rebuilt.status_mut() = status;
    *rebuilt.version_mut() = version;
    *rebuilt.headers_mut() = headers;
    *rebuilt.extensions_mut() = extensions;
    let mut response = Response::from(rebuilt);
    if let Some(details) = details {
        response.extensions_mut().insert(details);
    }
    Ok(response)
}

/// Extensions holding `url` the way `reqwest::Response::from` looks for it (its type is
/// private to reqwest: only its response builder can put it there).
fn url_extension(url: reqwest::Url) -> Extensions {
    http::Response::builder()
        .url(url)
        .body(())
        .map(|response| response.into_parts().0.extensions)
        .unwrap_or_default()
}
