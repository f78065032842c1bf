//! Key and lock-name validation, shared by the serializer and the lock.
//!
//! One rule for both, because a serializer key is very often the same string as a lock name, and
//! a lock name ends up as a key in a store: R2 allows 1024 bytes, Deno KV 2048 bytes for a whole
//! key, Workers KV 512 — and stores add a prefix. 512 UTF-8 bytes leaves room for that everywhere.

use core::fmt;

use crate::engine::messages;

/// The longest key or lock name accepted, in UTF-8 bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// Why a key or lock name was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// The key is the empty string.
    Empty,
    /// The key is longer than [`MAX_KEY_BYTES`] in UTF-8; carries its length in bytes.
    TooLong(usize),
}

impl KeyError {
    /// What is wrong, naming the key as `what` (`"key"`, `"lock name"`).
    pub fn message(&self, what: &str) -> String {
        match self {
            KeyError::Empty => messages::fill(messages::KEY_EMPTY, &[("what", what)]),
            KeyError::TooLong(len) => messages::fill(
                messages::KEY_TOO_LONG,
                &[
                    ("what", what),
                    ("bytes", &len.to_string()),
                    ("max", &MAX_KEY_BYTES.to_string()),
                ],
            ),
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message("key"))
    }
}

impl std::error::Error for KeyError {}

/// Checks that `key` is usable as a serializer key or a lock name.
///
/// ```
/// use keyturn::{validate_key, KeyError};
/// assert_eq!(validate_key("board:42"), Ok(()));
/// assert_eq!(validate_key(""), Err(KeyError::Empty));
/// assert_eq!(validate_key(&"x".repeat(513)), Err(KeyError::TooLong(513)));
/// ```
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        Err(KeyError::Empty)
    } else if key.len() > MAX_KEY_BYTES {
        Err(KeyError::TooLong(key.len()))
    } else {
        Ok(())
    }
}

/// The prefix of the lock a serializer with a store takes for a key: the key `k` is served
/// under the lock name `keyturn:serialize:k`. An application that acquires that name itself
/// takes a turn of that key (and only then: no other name starts so).
pub const SERIALIZE_PREFIX: &str = "keyturn:serialize:";

/// The prefix of the records of a name taken N at a time (`concurrency` above 1), past its
/// first: slot 0 of `name` is the record `name` itself (so N = 1 is a plain lock's record), slot
/// `k` the record `keyturn:slot:k:name` ([`slot_name`]). A lock name that starts so is that
/// slot's record.
pub const SLOT_PREFIX: &str = "keyturn:slot:";

/// The record of slot `slot` of the lock `name` (see [`SLOT_PREFIX`]).
///
/// ```
/// use keyturn::slot_name;
/// assert_eq!(slot_name("exports:acme", 0), "exports:acme");
/// assert_eq!(slot_name("exports:acme", 2), "keyturn:slot:2:exports:acme");
/// ```
pub fn slot_name(name: &str, slot: u16) -> String {
    if slot == 0 {
        return name.to_owned();
    }
    let mut key = String::with_capacity(SLOT_PREFIX.len() + 6 + name.len());
    key.push_str(SLOT_PREFIX);
    crate::engine::decimal::push_decimal(&mut key, u64::from(slot));
    key.push(':');
    key.push_str(name);
    key
}

/// Checks that `name` is usable as a lock name: [`validate_key`]'s rule, not counting a leading
/// [`SERIALIZE_PREFIX`] (so every serializer key has its lock).
///
/// ```
/// use keyturn::{validate_name, KeyError, SERIALIZE_PREFIX};
/// let key = "x".repeat(512);
/// assert_eq!(validate_name(&format!("{SERIALIZE_PREFIX}{key}")), Ok(()));
/// assert_eq!(validate_name(&"x".repeat(513)), Err(KeyError::TooLong(513)));
/// ```
pub fn validate_name(name: &str) -> Result<(), KeyError> {
    validate_key(name.strip_prefix(SERIALIZE_PREFIX).unwrap_or(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_up_to_the_limit_in_bytes() {
        assert_eq!(validate_key("a"), Ok(()));
        assert_eq!(validate_key(&"a".repeat(MAX_KEY_BYTES)), Ok(()));
        assert_eq!(
            validate_key(&"a".repeat(MAX_KEY_BYTES + 1)),
            Err(KeyError::TooLong(MAX_KEY_BYTES + 1))
        );
        // 171 three-byte characters are 513 bytes, though only 171 UTF-16 units.
        assert_eq!(validate_key(&"€".repeat(171)), Err(KeyError::TooLong(513)));
        assert_eq!(validate_key(&"€".repeat(170)), Ok(()));
    }

    #[test]
    fn refuses_empty() {
        assert_eq!(validate_key(""), Err(KeyError::Empty));
        assert_eq!(
            KeyError::Empty.to_string(),
            "key must be a non-empty string, got \"\""
        );
        assert_eq!(
            KeyError::TooLong(513).message("lock name"),
            "lock name is 513 bytes long in UTF-8; at most 512 are allowed"
        );
    }
}
