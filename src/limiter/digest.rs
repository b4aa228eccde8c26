use std::fmt::Write;

use sha2::{Digest, Sha256};

/// The first `hex_len` hex digits (at most 64) of the SHA-256 of `parts`, fed in order.
///
/// How identities (API keys, tenant ids) appear wherever they must be told apart but not
/// read: in Redis keys and in logs.
pub(crate) fn sha256_hex(parts: &[&[u8]], hex_len: usize) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    let mut hex = String::with_capacity(hex_len);
    for byte in hasher.finalize().iter().take(hex_len.div_ceil(2)) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex.truncate(hex_len);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest_prefix() {
        // SHA-256("abc") = ba7816bf 8f01cfea …
        assert_eq!(sha256_hex(&[b"abc"], 16), "ba7816bf8f01cfea");
        assert_eq!(sha256_hex(&[b"a", b"bc"], 7), "ba7816b");
    }
}
