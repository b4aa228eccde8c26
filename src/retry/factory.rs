//! [`BodyFactory`]: retrying a request whose body is a stream. The design (why the body and
//! not the whole request, why an extension) is argued in its docs, where users read it.

use std::error::Error as StdError;
use std::sync::Arc;

use http::Extensions;
use reqwest::{Body, Request, Response};

type BoxError = Box<dyn StdError + Send + Sync>;
type MakeBody = dyn Fn() -> Result<Body, BoxError> + Send + Sync;

/// Makes a request's body anew for each try, so a streamed body can be retried.
///
/// Set it with `with_extension` on the request. When the request's own body cannot be cloned
/// (a stream), that body goes with the first try and the factory makes the body of each retry.
/// A request that comes without a body takes every try's body from the factory, the first
/// included. A request whose body clones (bytes) is cloned as always: the factory is not called.
///
/// The factory changes what can be re-sent, not what may be: 429 is retried for every method,
/// 5xx and lost connections only for replay-safe requests (see
/// [`DefaultClassifier`](super::DefaultClassifier)), within the policy's count, deadline and
/// the retry budget. It is called after the retry is decided and before the wait, at most once
/// per try; if it fails, the caller gets a [`BodyFactoryError`] that holds the last outcome.
///
/// Setting the first body with `.body(upload.make()?)`, as below, keeps the request whole on a
/// client without the retry layer too (there the extension is ignored).
///
/// # Why a body factory, carried as an extension
///
/// A `reqwest::Request` clones when its body is bytes (or absent); a streamed body is read
/// once on its way out, so after a 429 nothing is left to send again.
/// - The body is the one part of a request that does not clone: method, URL, headers and
///   timeout always do. Rebuilding only the body keeps one request across tries, so the
///   replay-safety judgement ([`RequestFacts`](super::RequestFacts)) is made once, on what the
///   caller built, and cannot drift between tries; extensions set on the builder
///   ([`RetryOverride`](super::RetryOverride), a partition key) stay with it.
/// - A factory of whole requests (`|| client.put(url).body(..)`) would carry the client inside
///   the closure, could change the method or URL between tries behind the idempotency rules,
///   and would lose on each rebuild the extensions its builder set.
/// - An extension rides through `reqwest_middleware` untouched: the rest of the stack (pacing,
///   inner layers) sees each try as an ordinary request, and no new way of sending is needed.
/// - The factory is used only when it is needed (a stream, or no body): a body of bytes is
///   cloned, which is cheaper than making it again and sends the same bytes.
///
/// ```
/// use futures::stream;
/// use http_body_util::StreamBody;
/// use hyper::body::Frame;
/// use reqwest::Body;
/// use reqwest_polite::retry::BodyFactory;
/// use wiremock::matchers::method;
/// use wiremock::{Mock, MockServer, ResponseTemplate};
///
/// /// The upload as a stream of chunks (with reqwest's `stream` feature, `Body::wrap_stream`).
/// fn chunks() -> Body {
///     let frames = ["id,total\n", "1,10\n", "2,20\n"]
///         .map(|chunk| Ok::<_, std::io::Error>(Frame::data(bytes::Bytes::from(chunk))));
///     Body::wrap(StreamBody::new(stream::iter(frames)))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let server = MockServer::start().await;
/// Mock::given(method("PUT"))
///     .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "0"))
///     .up_to_n_times(1)
///     .mount(&server)
///     .await;
/// Mock::given(method("PUT")).respond_with(ResponseTemplate::new(200)).mount(&server).await;
///
/// let client = reqwest_polite::client();
/// let upload = BodyFactory::new(chunks);
/// let response = client
///     .put(format!("{}/report.csv", server.uri()))
///     .body(upload.make()?)
///     .with_extension(upload)
///     .send()
///     .await?;
/// assert_eq!(response.status(), 200);
/// let received = server.received_requests().await.unwrap();
/// assert_eq!(received.len(), 2);
/// assert!(received.iter().all(|r| r.body == b"id,total\n1,10\n2,20\n"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct BodyFactory {
    make: Arc<MakeBody>,
}

impl std::fmt::Debug for BodyFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyFactory").finish_non_exhaustive()
    }
}

impl BodyFactory {
    /// A factory that cannot fail (a stream over data already in hand).
    pub fn new<F>(make: F) -> Self
    where
        F: Fn() -> Body + Send + Sync + 'static,
    {
        BodyFactory {
            make: Arc::new(move || Ok(make())),
        }
    }

    /// A factory that can fail (it opens a file, asks a store): a failure ends the retries
    /// with a [`BodyFactoryError`] carrying this error as its source.
    pub fn try_new<F, E>(make: F) -> Self
    where
        F: Fn() -> Result<Body, E> + Send + Sync + 'static,
        E: Into<BoxError>,
    {
        BodyFactory {
            make: Arc::new(move || make().map_err(Into::into)),
        }
    }

    /// A new body (for the first try, when the caller sets it).
    pub fn make(&self) -> Result<Body, Box<dyn StdError + Send + Sync>> {
        (self.make)()
    }
}

/// The body factory failed, so the try it was making was not sent.
///
/// Nothing the server sent is lost: the outcome of the last try made is kept, response or
/// transport error. Reach this error from a `reqwest_middleware::Error` with
/// [`BodyFactoryError::from_middleware`].
#[derive(Debug, thiserror::Error)]
#[error("the body factory failed to make the body of try {}", .attempts + 1)]
pub struct BodyFactoryError {
    attempts: u32,
    // Boxed: a `Result` carrying this error stays small.
    last: Option<Box<reqwest_middleware::Result<Response>>>,
    #[source]
    source: BoxError,
}

impl BodyFactoryError {
    /// The factory failed with `source` after `attempts` tries, the last one ending in `last`.
    pub(super) fn new(
        attempts: u32,
        last: Option<reqwest_middleware::Result<Response>>,
        source: BoxError,
    ) -> Self {
        BodyFactoryError {
            attempts,
            last: last.map(Box::new),
            source,
        }
    }

    /// Tries sent before the factory failed (0 when the first body could not be made).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The last response, if the last try made got one.
    pub fn response(&self) -> Option<&Response> {
        self.last.as_deref().and_then(|last| last.as_ref().ok())
    }

    /// The outcome of the last try made, as it came (`None` if no try was made).
    pub fn into_last_outcome(self) -> Option<reqwest_middleware::Result<Response>> {
        self.last.map(|last| *last)
    }

    /// The `BodyFactoryError` inside a middleware error, or the error back when it is
    /// something else.
    pub fn from_middleware(
        error: reqwest_middleware::Error,
    ) -> Result<BodyFactoryError, reqwest_middleware::Error> {
        match error {
            reqwest_middleware::Error::Middleware(inner) => inner
                .downcast::<BodyFactoryError>()
                .map_err(reqwest_middleware::Error::Middleware),
            other => Err(other),
        }
    }
}

/// The bodies of one call's tries, when a [`BodyFactory`] makes them.
pub(super) struct Bodies {
    factory: Option<BodyFactory>,
    /// The body of the next try, made (or set aside) ahead of it.
    next: Option<Body>,
}

impl Bodies {
    /// Takes a streamed body out of `request`, so that what remains clones, when a factory can
    /// make the next ones. Without a factory, or with a body that clones, it does nothing.
    pub(super) fn split(request: &mut Request, extensions: &Extensions) -> Self {
        let idle = Bodies {
            factory: None,
            next: None,
        };
        let Some(factory) = extensions.get::<BodyFactory>() else {
            return idle;
        };
        match request.body() {
            Some(body) if body.as_bytes().is_some() => idle,
            _ => Bodies {
                factory: Some(factory.clone()),
                next: request.body_mut().take(),
            },
        }
    }

    /// Puts this try's body into `attempt`: the one made ahead, or a new one.
    pub(super) fn fill(&mut self, attempt: &mut Request) -> Result<(), BodyFactoryError> {
        let Some(factory) = &self.factory else {
            return Ok(());
        };
        let body = match self.next.take() {
            Some(body) => body,
            None => factory
                .make()
                .map_err(|source| BodyFactoryError::new(0, None, source))?,
        };
        *attempt.body_mut() = Some(body);
        Ok(())
    }

    /// Makes the next try's body now, while the last outcome is still at hand to return if
    /// the factory fails.
    pub(super) fn prepare(&mut self) -> Result<(), BoxError> {
        if let Some(factory) = &self.factory {
            self.next = Some(factory.make()?);
        }
        Ok(())
    }
}
