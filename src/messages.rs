//! Error texts that JavaScript shows too, as templates with `{name}` placeholders: the Rust
//! errors fill them here, and the build writes them into the package's `constants.js` (see
//! `examples/js_constants.rs`), so both languages say the same thing from one source.

/// A work abandoned at its deadline: word for word the seed's text, so logs and tests that
/// match it keep matching.
pub const TIMEOUT: &str = "serialized work for {key} timed out after {timeoutMs} ms: released, the next notification re-decides";

/// A call refused because its key has `maxPending` works queued or running.
pub const QUEUE_FULL: &str =
    "serialized work for {key} refused: {maxPending} works are queued or running for it already";

/// A live holder kept a lock's name for the whole wait.
pub const LOCK_UNAVAILABLE: &str =
    "lock {key} was held by a live holder for the whole wait of {waitMs} ms";

/// The wasm instance trapped: every call of it fails from then on.
pub const INSTANCE_FAILED: &str = "keyturn's wasm instance failed ({reason}); serializers and locks made before this fail with this error, new ones get a fresh instance";

/// `template` with each `{name}` replaced by its value.
///
/// ```
/// use keyturn::messages::{fill, TIMEOUT};
/// assert_eq!(
///     fill(TIMEOUT, &[("key", "k"), ("timeoutMs", "40")]),
///     "serialized work for k timed out after 40 ms: released, the next notification re-decides"
/// );
/// ```
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}');
        let value = close.and_then(|close| {
            values
                .iter()
                .find(|(name, _)| *name == &after[..close])
                .map(|(_, value)| (close, *value))
        });
        match value {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn fills_known_names_and_keeps_the_rest() {
        assert_eq!(
            fill("{a} and {b}", &[("a", "1"), ("b", "{a}")]),
            "1 and {a}"
        );
        assert_eq!(fill("{unknown} {a", &[("a", "1")]), "{unknown} {a");
        assert_eq!(fill("", &[]), "");
    }
}
