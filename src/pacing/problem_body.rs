//! Reading a refusal's problem details without taking its body from the caller.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Extensions;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use reqwest::{Response, ResponseBuilderExt};

use crate::headers::{PROBLEM_BODY_LIMIT, ProblemDetails};

/// `response`, with its [`ProblemDetails`] in its extensions when it is a 429 or 503 whose
/// `application/problem+json` body is at most [`PROBLEM_BODY_LIMIT`] bytes.
///
/// Any other response comes back as it came, its body unread. A body worth reading is read up
/// to the limit, for at most [`PROBLEM_BODY_WAIT`], and the response rebuilt with its status,
/// version, headers, url and extensions, and the same bytes: those read, then the rest of the
/// stream, unread (a body of unknown length, as HTTP/2 and chunked answers often have, that is
/// longer than the limit or slower than the wait; its details are then not read). A body that
/// fails to arrive is the error the caller would have met reading it.
pub(crate) async fn with_problem_details(response: Response) -> reqwest::Result<Response> {
    let too_long = response
        .content_length()
        .is_some_and(|length| length > PROBLEM_BODY_LIMIT as u64);
    if too_long || !ProblemDetails::may_be_in(response.status(), response.headers()) {
        return Ok(response);
    }
    let url = response.url().clone();
    let response: http::Response<reqwest::Body> = response.into();
    let (mut parts, mut body) = response.into_parts();
    let mut read = VecDeque::new();
    let mut length = 0;
    let mut whole = false;
    let deadline = tokio::time::Instant::now() + PROBLEM_BODY_WAIT;
    while length <= PROBLEM_BODY_LIMIT {
        // A frame not yet come is not lost: `frame` only polls the body.
        let Ok(next) = tokio::time::timeout_at(deadline, body.frame()).await else {
            break;
        };
        let Some(frame) = next else {
            whole = true;
            break;
        };
        // Data, or trailers (which a reqwest body never yields: dropped with nothing lost).
        if let Ok(data) = frame?.into_data() {
            length += data.len();
            read.push_back(data);
        }
    }
    let mut extensions = url_extension(url);
    extensions.extend(std::mem::take(&mut parts.extensions));
    parts.extensions = extensions;
    let (body, details) = if whole {
        let bytes = concat(&read);
        let details = ProblemDetails::from_body(parts.status, &parts.headers, &bytes);
        (reqwest::Body::from(bytes), details)
    } else {
        (reqwest::Body::wrap(Prefixed { read, rest: body }), None)
    };
    let mut response = Response::from(http::Response::from_parts(parts, body));
    if let Some(details) = details {
        response.extensions_mut().insert(details);
    }
    Ok(response)
}

/// The longest a refusal's body is waited for: a caller who only looks at the status must not
/// wait for a body it would never have read.
pub(crate) const PROBLEM_BODY_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

fn concat(chunks: &VecDeque<Bytes>) -> Bytes {
    match chunks.len() {
        0 => Bytes::new(),
        1 => chunks[0].clone(),
        _ => chunks.iter().flatten().copied().collect::<Vec<u8>>().into(),
    }
}

/// A body whose first chunks were read already: they come first, then the rest as it comes.
struct Prefixed {
    read: VecDeque<Bytes>,
    rest: reqwest::Body,
}

impl HttpBody for Prefixed {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        if let Some(chunk) = self.read.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.read.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let read: usize = self.read.iter().map(Bytes::len).sum();
        let mut hint = self.rest.size_hint();
        let read = read as u64;
        hint.set_lower(hint.lower().saturating_add(read));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(read));
        }
        hint
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of unknown length, in `chunks`.
    #[derive(Clone)]
    struct Chunked(VecDeque<Bytes>);

    impl HttpBody for Chunked {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
        }
    }

    fn refusal(chunks: &[&[u8]]) -> Response {
        let body = Chunked(chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect());
        let url = reqwest::Url::parse("http://api.test/orders").unwrap();
        let response = http::Response::builder()
            .status(429)
            .header("content-type", "application/problem+json")
            .url(url)
            .body(reqwest::Body::wrap(body))
            .unwrap();
        Response::from(response)
    }

    const PROBLEM: &str = r#"{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["daily"]}"#;

    #[tokio::test]
    async fn a_chunked_problem_body_is_read_and_given_back_whole() {
        let (head, tail) = PROBLEM.as_bytes().split_at(40);
        let response = refusal(&[head, tail]);
        assert_eq!(response.content_length(), None);
        let response = with_problem_details(response).await.unwrap();
        let details = response.extensions().get::<ProblemDetails>().unwrap();
        assert_eq!(details.violated_policies, ["daily"]);
        assert_eq!(response.url().as_str(), "http://api.test/orders");
        assert_eq!(response.status(), 429);
        assert_eq!(response.text().await.unwrap(), PROBLEM);
    }

    #[tokio::test]
    async fn a_chunked_body_past_the_limit_is_not_parsed_and_comes_back_byte_for_byte() {
        let chunk = vec![b'x'; 4096];
        let chunks: Vec<&[u8]> = (0..6).map(|_| chunk.as_slice()).collect();
        let response = with_problem_details(refusal(&chunks)).await.unwrap();
        assert!(response.extensions().get::<ProblemDetails>().is_none());
        let body = response.bytes().await.unwrap();
        assert_eq!(body.len(), 6 * 4096);
        assert!(body.iter().all(|&b| b == b'x'));
    }
}
