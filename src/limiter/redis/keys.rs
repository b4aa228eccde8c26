//! Key layout: `rp:{<readable name>:<digest>}:<part>`.
//!
//! The `{…}` hash tag puts every key of one limited identity in one Redis Cluster slot, so a
//! script may touch all of them. The identity only enters as a SHA-256 digest: no secret is
//! stored in clear, and no identity (braces, colons, newlines, megabytes) can change the layout.

use crate::limiter::digest::sha256_hex;

/// Longest readable name kept in a key; the digest tells longer names apart anyway.
const MAX_READABLE_NAME: usize = 48;
/// Hex digits of the digest kept in a key (128 bits: collisions are not a concern).
const DIGEST_HEX_LEN: usize = 32;

/// The hash-tagged prefix shared by all keys of `identity` under the limit called `name`.
pub(crate) fn key_prefix(name: &str, identity: &str) -> String {
    // The name's length first, so ("ab", "c") and ("a", "bc") give different digests.
    let name_len = (name.len() as u64).to_be_bytes();
    let hex = sha256_hex(
        &[&name_len, name.as_bytes(), identity.as_bytes()],
        DIGEST_HEX_LEN,
    );
    format!("rp:{{{}:{hex}}}", readable_name(name))
}

/// The name with anything that could disturb a key (braces, colons, spaces, controls) replaced.
fn readable_name(name: &str) -> String {
    name.chars()
        .take(MAX_READABLE_NAME)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One key under `prefix`, e.g. `rp:{api:3f…}:tokens`.
pub(crate) fn key(prefix: &str, part: &str) -> String {
    format!("{prefix}:{part}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').expect("key has a hash tag");
        let close = key[open..].find('}').expect("hash tag is closed") + open;
        &key[open + 1..close]
    }

    #[test]
    fn awkward_identities_give_one_hash_tag_of_bounded_length() {
        let long = "x".repeat(10_000);
        for identity in ["", "a}b{c", "a:b:c", "line\nbreak", "{tag}", long.as_str()] {
            let key = key(&key_prefix("api", identity), "tokens");
            assert_eq!(key.matches('{').count(), 1, "{key}");
            assert_eq!(key.matches('}').count(), 1, "{key}");
            assert!(key.len() < 100, "{key}");
            assert!(!key.contains('\n'));
            assert_eq!(hash_tag(&key).len(), "api:".len() + DIGEST_HEX_LEN);
        }
    }

    #[test]
    fn awkward_names_are_made_readable_and_still_told_apart() {
        let a = key_prefix("a:b}", "id");
        let b = key_prefix("a_b_", "id");
        assert!(a.starts_with("rp:{a_b_:"), "{a}");
        assert_ne!(a, b);
        assert_eq!(a.matches('}').count(), 1);
    }

    #[test]
    fn name_and_identity_boundary_is_part_of_the_digest() {
        assert_ne!(key_prefix("ab", "c")[7..], key_prefix("a", "bc")[6..]);
        assert_ne!(key_prefix("ab", "c"), key_prefix("ab", "d"));
    }
}
