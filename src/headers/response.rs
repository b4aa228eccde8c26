use super::RateLimitInfo;

impl RateLimitInfo {
    /// The rate-limit facts of `response`, parsed once: the first caller parses the headers and
    /// keeps the result in the response's extensions; later callers (the retry layer above the
    /// pacing layer, or user code) read that one, without parsing or copying.
    ///
    /// ```
    /// use reqwest_polite::RateLimitInfo;
    ///
    /// let http = http::Response::builder()
    ///     .status(429)
    ///     .header("retry-after", "3")
    ///     .body(Vec::<u8>::new())
    ///     .unwrap();
    /// let mut response = reqwest::Response::from(http);
    /// let info = RateLimitInfo::of_response(&mut response);
    /// assert_eq!(info.retry_after, Some(std::time::Duration::from_secs(3)));
    /// assert!(response.extensions().get::<RateLimitInfo>().is_some());
    /// ```
    pub fn of_response(response: &mut reqwest::Response) -> &RateLimitInfo {
        if response.extensions().get::<RateLimitInfo>().is_none() {
            let info = RateLimitInfo::from_headers(response.headers());
            response.extensions_mut().insert(info);
        }
        response
            .extensions()
            .get::<RateLimitInfo>()
            .expect("inserted just above when missing")
    }
}
