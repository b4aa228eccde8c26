//! What speaks at an address, told from its first bytes: asked after a connection failed for a
//! reason the Redis client does not name (a reset, a reply it cannot parse, a TLS handshake
//! that never ends), so that the error can say "this port wants TLS" or "this is an HTTP
//! server" instead of "connection reset".
//!
//! Two questions, each on a connection of its own: an inline `PING` (a plain Redis answers
//! `+PONG` or `-NOAUTH…`, an HTTP server `HTTP/1.1 400`, a TLS server closes the connection),
//! and a TLS `ClientHello` (a TLS server answers with a handshake or an alert record; a plain
//! Redis waits for the end of a line that never comes).

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// What answered at the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Speaker {
    /// Redis without TLS.
    PlainRedis,
    /// A TLS server.
    Tls,
    /// An HTTP server.
    Http,
    /// Something that is none of these.
    Unknown,
}

/// Asks `host:port` who it is, within `limit`: the `PING` first (Redis and HTTP answer it at
/// once; a TLS server closes), then the `ClientHello` if the `PING` told nothing. `Unknown` when
/// neither answer is clear.
pub(super) async fn speaker(host: &str, port: u16, limit: Duration) -> Speaker {
    let deadline = tokio::time::Instant::now() + limit;
    match ask(host, port, b"PING\r\n", deadline).await.as_deref() {
        Some([b'+' | b'-', ..]) => return Speaker::PlainRedis,
        Some(reply) if reply.starts_with(b"HTTP/") => return Speaker::Http,
        _ => {}
    }
    match ask(host, port, &CLIENT_HELLO, deadline).await.as_deref() {
        // a handshake (22) or an alert (21) record, of TLS 1.x
        Some([22 | 21, 3, ..]) => Speaker::Tls,
        _ => Speaker::Unknown,
    }
}

/// Sends `question` and reads the first bytes of the answer; `None` when the connection fails,
/// closes without a byte, or says nothing by `deadline`.
async fn ask(
    host: &str,
    port: u16,
    question: &[u8],
    deadline: tokio::time::Instant,
) -> Option<Vec<u8>> {
    let exchange = async {
        let mut stream = TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(question).await.ok()?;
        let mut reply = vec![0; 16];
        let read = stream.read(&mut reply).await.ok()?;
        reply.truncate(read);
        (read > 0).then_some(reply)
    };
    tokio::time::timeout_at(deadline, exchange)
        .await
        .ok()
        .flatten()
}

/// A TLS 1.2 `ClientHello` any TLS server answers (with its own hello, or an alert when it
/// shares none of these ciphers): ECDHE with AES-GCM or ChaCha20, RSA or ECDSA, the P-256 and
/// X25519 groups, and the signature algorithms of those certificates.
const CLIENT_HELLO: [u8; 80] = [
    // record: handshake, legacy version 3.1, 75 bytes
    22, 3, 1, 0, 75, //
    // ClientHello, 71 bytes, version 3.3
    1, 0, 0, 71, 3, 3, //
    // random: 32 bytes (no secret rides on this handshake)
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, //
    16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, //
    // no session id
    0, //
    // 4 cipher suites: ECDHE-RSA-AES128-GCM, ECDHE-ECDSA-AES128-GCM, ECDHE-RSA-CHACHA20,
    // ECDHE-ECDSA-CHACHA20
    0, 8, 0xc0, 0x2f, 0xc0, 0x2b, 0xcc, 0xa8, 0xcc, 0xa9, //
    // compression: none
    1, 0, //
    // extensions, 22 bytes
    0, 22, //
    // supported_groups: x25519, secp256r1
    0, 10, 0, 6, 0, 4, 0, 29, 0, 23, //
    // signature_algorithms: rsa_pss_rsae_sha256, rsa_pkcs1_sha256, ecdsa_secp256r1_sha256
    0, 13, 0, 8, 0, 6, 8, 4, 4, 1, 4, 3, //
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a big-endian length of `width` bytes at `at`.
    fn length(bytes: &[u8], at: usize, width: usize) -> usize {
        bytes[at..at + width]
            .iter()
            .fold(0, |n, &byte| n << 8 | usize::from(byte))
    }

    #[test]
    fn the_client_hello_lengths_add_up() {
        let hello = &CLIENT_HELLO;
        assert_eq!(length(hello, 3, 2), hello.len() - 5, "record");
        assert_eq!(length(hello, 6, 3), hello.len() - 9, "handshake");
        // version 2, random 32, session id 1, then the cipher suites
        let suites = 9 + 2 + 32 + 1;
        let compression = suites + 2 + length(hello, suites, 2);
        let extensions = compression + 1 + length(hello, compression, 1);
        assert_eq!(length(hello, extensions, 2), hello.len() - extensions - 2);
        let mut at = extensions + 2;
        while at < hello.len() {
            at += 4 + length(hello, at + 2, 2);
        }
        assert_eq!(at, hello.len(), "each extension's length");
    }
}
