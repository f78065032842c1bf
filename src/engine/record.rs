//! The lock record: what a lock keeps in its store, as versioned JSON.
//!
//! ```json
//! {"keyturn":1,"state":"held","token":"9f0c…","fence":12,"at":1764452000000,"lease":2000}
//! ```
//!
//! - `keyturn`: the format's version, 1. A record without it, or with another, is not ours.
//! - `state`: `"held"` while a holder has the lock, `"free"` once released. A released record
//!   stays in the store (no store here has a conditional delete), so its fence is kept.
//! - `token`: the holder's random token (32 hex digits, 128 bits); empty when free. Only the
//!   holder of the token releases a held record.
//! - `fence`: the last fence handed out under this record (a write that reserves fences for the
//!   works that follow it carries the last it reserved). Every acquisition of the name — create,
//!   re-acquire, takeover, hand-off — takes one above it, and at least its clock's microseconds,
//!   so a protected resource can refuse a write carrying an older fence even after the store
//!   lost the record (the lock core's `FENCES_PER_MS`).
//! - `at`: when the record was written, in milliseconds of the writer's clock (`Date.now()` by
//!   default): a held record older than its lease is taken over. No two writes of a record carry
//!   the same bytes: a holder's renewal moves `at` by at least 1, so a store whose version is a
//!   hash of the value never sees a version come back.
//! - `lease`: the lease its holder promised itself (its `staleMs`, whole milliseconds), on held
//!   records: a taker waits out the longer of it and its own. A free record has none.
//! - `asks` (optional): the isolates waiting for the name, in the order they asked
//!   ([`Asks`](crate::engine::asks::Asks)). A string, so a record stays a flat object.
//! - `starts` (optional): a paced serializer's last starts of the key
//!   ([`Starts`](crate::engine::starts::Starts)), which its pace holds to in every isolate.
//! - `n` (optional): the name's `concurrency`, on every slot record of a name taken N at a time
//!   (N above 1; absent means 1). An acquisition with another `concurrency` is refused.
//!
//! Unknown fields are ignored, so a later version can add some; anything that does not parse
//! as this format is a record that is not ours and is never released by us.

use core::fmt;

use crate::engine::asks::Asks;
use crate::engine::decimal::push_decimal;
use crate::engine::starts::Starts;

/// The format version this crate writes and reads.
pub const FORMAT: u32 = 1;

/// The largest fence (2^53 - 1): fences must survive a round trip through a JS number.
pub const MAX_FENCE: u64 = (1 << 53) - 1;

/// One lock record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Whether a holder has the lock.
    pub held: bool,
    /// The holder's token; empty when free.
    pub token: String,
    /// The fence of the last acquisition.
    pub fence: u64,
    /// When the record was written, in epoch milliseconds of the writer's clock.
    pub at: f64,
    /// The lease its holder promised itself, in milliseconds: `Some` on held records, `None` on
    /// free ones.
    pub lease: Option<u64>,
    /// The isolates waiting for the name, oldest first.
    pub asks: Asks,
    /// A paced serializer's last starts of the key.
    pub starts: Starts,
    /// The name's `concurrency`: how many slots it has (1 when the record does not say).
    pub n: u16,
}

/// Why a stored text is not a record of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotARecord(pub &'static str);

impl fmt::Display for NotARecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a keyturn lock record: {}", self.0)
    }
}

impl std::error::Error for NotARecord {}

impl Record {
    /// A held record, promising the default lease.
    #[cfg(test)]
    pub fn held(token: &str, fence: u64, at: f64) -> Record {
        Record {
            held: true,
            token: token.to_owned(),
            fence,
            at,
            lease: Some(u64::from(crate::engine::options::LOCK_STALE_MS)),
            asks: Asks::default(),
            starts: Starts::default(),
            n: 1,
        }
    }

    /// A free record with fence `fence`: what a release leaves, keeping the holder's fence.
    #[cfg(test)]
    pub fn free(fence: u64, at: f64) -> Record {
        Record {
            held: false,
            token: String::new(),
            fence,
            at,
            lease: None,
            asks: Asks::default(),
            starts: Starts::default(),
            n: 1,
        }
    }

    /// The record as stored; a token that is not ours is escaped so the JSON stays valid.
    #[cfg(test)]
    pub fn encode(&self) -> String {
        let token = escaped(&self.token);
        encode_ours(
            self.held,
            &token,
            self.fence,
            self.at,
            self.lease,
            &self.asks,
            &self.starts,
            self.n,
        )
    }

    /// Reads a stored text; an error for anything that is not a record of this format.
    pub fn decode(text: &str) -> Result<Record, NotARecord> {
        let Fields {
            format,
            state,
            token,
            fence,
            at,
            lease,
            asks,
            starts,
            n,
        } = Reader::new(text).object()?;
        Record::from_fields(
            format,
            state.as_deref(),
            token,
            fence,
            at,
            lease,
            asks.as_deref(),
            starts.as_deref(),
            n,
        )
    }
}

impl Record {
    /// The record with these fields, as a parser found them (`None` where a field is absent or
    /// of another type): the checks of [`Record::decode`], for a caller that parsed the JSON
    /// itself (the JS package uses `JSON.parse`).
    #[allow(clippy::too_many_arguments)]
    pub fn from_fields(
        format: Option<f64>,
        state: Option<&str>,
        token: Option<String>,
        fence: Option<f64>,
        at: Option<f64>,
        lease: Option<f64>,
        asks: Option<&str>,
        starts: Option<&str>,
        n: Option<f64>,
    ) -> Result<Record, NotARecord> {
        if format != Some(f64::from(FORMAT)) {
            return Err(NotARecord("no \"keyturn\": 1"));
        }
        let held = match state {
            Some("held") => true,
            Some("free") => false,
            _ => return Err(NotARecord("state is neither \"held\" nor \"free\"")),
        };
        let token = token.ok_or(NotARecord("no token"))?;
        if held && token.is_empty() {
            return Err(NotARecord("a held record without a token"));
        }
        let fence = fence.ok_or(NotARecord("no fence"))?;
        if !(fence >= 1.0 && fence <= MAX_FENCE as f64 && fence.fract() == 0.0) {
            return Err(NotARecord("fence is not a whole number from 1 to 2^53 - 1"));
        }
        let at = at
            .filter(|at| at.is_finite())
            .ok_or(NotARecord("no time"))?;
        let lease = match lease {
            Some(ms) if ms >= 1.0 && ms <= MAX_FENCE as f64 && ms.fract() == 0.0 => Some(ms as u64),
            Some(_) => return Err(NotARecord("lease is not a whole number of milliseconds")),
            None if held => return Err(NotARecord("a held record without a lease")),
            None => None,
        };
        let n = match n {
            None => 1,
            Some(n) if (1.0..=f64::from(u16::MAX)).contains(&n) && n.fract() == 0.0 => n as u16,
            Some(_) => return Err(NotARecord("n is not a whole number from 1 to 65535")),
        };
        Ok(Record {
            held,
            token,
            fence: fence as u64,
            at,
            lease,
            asks: asks.map(Asks::parse).unwrap_or_default(),
            starts: starts.map(Starts::parse).unwrap_or_default(),
            n,
        })
    }
}

/// `token` as a JSON string's content: ours as it is, another's escaped.
#[cfg(test)]
fn escaped(token: &str) -> std::borrow::Cow<'_, str> {
    if is_plain(token) {
        return std::borrow::Cow::Borrowed(token);
    }
    let mut escaped = String::with_capacity(token.len() + 8);
    for c in token.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                escaped.push_str("\\u00");
                escaped.push(HEX[(c as usize) >> 4] as char);
                escaped.push(HEX[(c as usize) & 15] as char);
            }
            c => escaped.push(c),
        }
    }
    std::borrow::Cow::Owned(escaped)
}

/// Whether a token needs no escaping in a record's JSON (ours are hex).
pub(crate) fn is_plain(token: &str) -> bool {
    token.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// [`Record::encode`] for a token of ours (hex, or empty), which needs no escaping: what the lock core
/// writes, and all it links into the wasm. `n` is written only above 1, so a name taken one at
/// a time keeps the records it always had.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_ours(
    held: bool,
    token: &str,
    fence: u64,
    at: f64,
    lease: Option<u64>,
    asks: &Asks,
    starts: &Starts,
    n: u16,
) -> String {
    // Room for the longest record (a 32-digit token, 20-digit numbers) and a few asks: one
    // allocation.
    let mut out = String::with_capacity(160 + 34 * asks.len() + 8 * starts.as_slice().len());
    out.push_str("{\"keyturn\":1,\"state\":\"");
    out.push_str(if held { "held" } else { "free" });
    out.push_str("\",\"token\":\"");
    out.push_str(token);
    out.push_str("\",\"fence\":");
    push_decimal(&mut out, fence);
    out.push_str(",\"at\":");
    push_decimal(&mut out, at.max(0.0).floor() as u64);
    if let Some(lease) = lease {
        out.push_str(",\"lease\":");
        push_decimal(&mut out, lease);
    }
    asks.push_field(&mut out);
    starts.push_field(&mut out);
    if n > 1 {
        out.push_str(",\"n\":");
        push_decimal(&mut out, u64::from(n));
    }
    out.push('}');
    out
}

/// The fields a record's text gave, where they had their type: what [`Record::from_fields`]
/// checks.
#[derive(Default)]
struct Fields {
    format: Option<f64>,
    state: Option<String>,
    token: Option<String>,
    fence: Option<f64>,
    at: Option<f64>,
    lease: Option<f64>,
    asks: Option<String>,
    starts: Option<String>,
    n: Option<f64>,
}

/// A scalar value of a record's text.
enum Value {
    String(String),
    /// A whole number up to [`MAX_FENCE`] (a fraction, an exponent or more is `Other`).
    Number(f64),
    Other,
}

impl Fields {
    /// Keeps `value` for the field `name`; a field of ours with a value of another type makes
    /// the text not a record. Unknown fields are ignored.
    fn set(&mut self, name: &str, value: Value) -> Result<(), NotARecord> {
        match (name, value) {
            ("keyturn", Value::Number(n)) => self.format = Some(n),
            ("state", Value::String(text)) => self.state = Some(text),
            ("token", Value::String(text)) => self.token = Some(text),
            ("fence", Value::Number(n)) => self.fence = Some(n),
            ("at", Value::Number(n)) => self.at = Some(n),
            ("lease", Value::Number(n)) => self.lease = Some(n),
            ("n", Value::Number(n)) => self.n = Some(n),
            // Asks only order waiters: one of another type is left out, as a bad entry is.
            ("asks", Value::String(text)) => self.asks = Some(text),
            ("starts", Value::String(text)) => self.starts = Some(text),
            ("keyturn" | "state" | "token" | "fence" | "at" | "lease" | "n", _) => {
                return Err(NotARecord("a field has the wrong type"))
            }
            _ => {}
        }
        Ok(())
    }
}

const NOT_FLAT: NotARecord = NotARecord("not a flat JSON object");
const BAD_STRING: NotARecord = NotARecord("a bad JSON string");

/// Reads a record's text: a JSON object whose values are scalars, all a record is (nested
/// values are refused). Byte by byte, with no float parser and no panic: both would cost the
/// wasm modules kilobytes.
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader { text, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The whole text as one object.
    fn object(mut self) -> Result<Fields, NotARecord> {
        let mut fields = Fields::default();
        self.whitespace();
        if !self.eat(b'{') {
            return Err(NOT_FLAT);
        }
        self.whitespace();
        if !self.eat(b'}') {
            loop {
                self.whitespace();
                if !self.eat(b'"') {
                    return Err(NOT_FLAT);
                }
                let name = self.string()?;
                self.whitespace();
                if !self.eat(b':') {
                    return Err(NOT_FLAT);
                }
                self.whitespace();
                let value = self.value()?;
                fields.set(&name, value)?;
                self.whitespace();
                if self.eat(b',') {
                    continue;
                }
                if self.eat(b'}') {
                    break;
                }
                return Err(NOT_FLAT);
            }
        }
        self.whitespace();
        if self.at != self.text.len() {
            return Err(NOT_FLAT);
        }
        Ok(fields)
    }

    /// A string, a whole number, or one of the words (read as of another type).
    fn value(&mut self) -> Result<Value, NotARecord> {
        match self.peek() {
            Some(b'"') => {
                self.at += 1;
                Ok(Value::String(self.string()?))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                let rest = self.text.get(self.at..).unwrap_or_default();
                let word = ["true", "false", "null"]
                    .into_iter()
                    .find(|word| rest.starts_with(word))
                    .ok_or(NOT_FLAT)?;
                self.at += word.len();
                Ok(Value::Other)
            }
        }
    }

    /// A number. Every number of a record is a whole number: a fraction or an exponent reads as
    /// a field of the wrong type.
    fn number(&mut self) -> Result<Value, NotARecord> {
        let negative = self.eat(b'-');
        let leading_zero = self.peek() == Some(b'0');
        let mut whole: u64 = 0;
        let mut digits = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            self.at += 1;
            digits += 1;
            whole = whole
                .saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'));
        }
        // JSON has no leading zeros (`JSON.parse` refuses `012`, and so does this).
        if digits == 0 || (leading_zero && digits > 1) {
            return Err(NOT_FLAT);
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            while matches!(
                self.peek(),
                Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            ) {
                self.at += 1;
            }
            return Ok(Value::Other);
        }
        if whole > MAX_FENCE {
            return Ok(Value::Other);
        }
        let number = whole as f64;
        Ok(Value::Number(if negative { -number } else { number }))
    }

    /// The rest of a string whose opening quote was read. Runs without escapes are copied as
    /// they are: the text is UTF-8, and they end at ASCII bytes.
    fn string(&mut self) -> Result<String, NotARecord> {
        let mut out = String::new();
        let mut run = self.at;
        loop {
            match self.next().ok_or(BAD_STRING)? {
                b'"' => {
                    out.push_str(self.text.get(run..self.at - 1).ok_or(BAD_STRING)?);
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(self.text.get(run..self.at - 1).ok_or(BAD_STRING)?);
                    let escaped = match self.next().ok_or(BAD_STRING)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode()?,
                        _ => return Err(BAD_STRING),
                    };
                    out.push(escaped);
                    run = self.at;
                }
                byte if byte < 0x20 => return Err(BAD_STRING),
                _ => {}
            }
        }
    }

    /// A `\u` escape's character, a surrogate pair's included.
    fn unicode(&mut self) -> Result<char, NotARecord> {
        let first = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if !(self.eat(b'\\') && self.eat(b'u')) {
                return Err(BAD_STRING);
            }
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(BAD_STRING);
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or(BAD_STRING)
    }

    fn hex4(&mut self) -> Result<u32, NotARecord> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = match self.next() {
                Some(byte @ b'0'..=b'9') => byte - b'0',
                Some(byte @ b'a'..=b'f') => byte - b'a' + 10,
                Some(byte @ b'A'..=b'F') => byte - b'A' + 10,
                _ => return Err(BAD_STRING),
            };
            code = code * 16 + u32::from(digit);
        }
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let held = Record::held("0123456789abcdef0123456789abcdef", 12, 1_764_452_000_000.0);
        let text = held.encode();
        assert_eq!(
            text,
            r#"{"keyturn":1,"state":"held","token":"0123456789abcdef0123456789abcdef","fence":12,"at":1764452000000,"lease":2000}"#
        );
        assert_eq!(Record::decode(&text), Ok(held.clone()));
        let free = Record::free(held.fence, 1_764_452_000_500.0);
        assert_eq!(Record::decode(&free.encode()), Ok(free));
        // A slot record of a name taken 3 at a time says so; at 1 it says nothing.
        let slot = Record {
            n: 3,
            ..Record::free(4, 5.0)
        };
        assert_eq!(
            slot.encode(),
            r#"{"keyturn":1,"state":"free","token":"","fence":4,"at":5,"n":3}"#
        );
        assert_eq!(Record::decode(&slot.encode()), Ok(slot));
        for (fence, at) in [
            (0, 0.0),
            (9, 9.99),
            (10, 10.0),
            (9_007_199_254_740_991, 1e15),
        ] {
            let text = Record::held("t", fence, at).encode();
            let expected = format!(
                r#"{{"keyturn":1,"state":"held","token":"t","fence":{fence},"at":{},"lease":2000}}"#,
                at.floor() as u64
            );
            assert_eq!(text, expected);
        }
    }

    #[test]
    fn tolerates_whitespace_order_escapes_and_unknown_fields() {
        let text = "{ \"fence\" : 3 , \"extra\": [1] }";
        assert!(Record::decode(text).is_err(), "nested values are not ours");
        let text = " {\"at\": 5, \"fence\": 3, \"future\": null, \"token\": \"a\\u0062\\\"\", \"state\": \"held\", \"lease\": 9, \"keyturn\": 1}\n";
        let record = Record::decode(text).unwrap();
        assert_eq!(
            (record.token.as_str(), record.fence, record.held),
            ("ab\"", 3, true)
        );
        let odd = Record::held("a\"b\\c\u{1}", 1, 0.0);
        assert_eq!(Record::decode(&odd.encode()), Ok(odd));
    }

    /// What `serde_json` reads in `text`, held to the record's rules: what `decode` must agree
    /// with.
    fn by_serde(text: &str) -> Option<Record> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let object = value.as_object()?;
        if object.values().any(|v| v.is_object() || v.is_array()) {
            return None;
        }
        let number = |name: &str| match object.get(name) {
            None => Ok(None),
            Some(serde_json::Value::Number(n)) => match n.as_u64() {
                Some(n) if n <= MAX_FENCE => Ok(Some(n as f64)),
                _ => match n.as_i64() {
                    Some(n) if n >= -(MAX_FENCE as i64) => Ok(Some(n as f64)),
                    _ => Ok(Some(f64::NAN)),
                },
            },
            Some(_) => Err(()),
        };
        let string = |name: &str| match object.get(name) {
            None => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(()),
        };
        let fields = (
            number("keyturn").ok()?,
            string("state").ok()?,
            string("token").ok()?,
            number("fence").ok()?,
            number("at").ok()?,
            number("lease").ok()?,
            number("n").ok()?,
        );
        Record::from_fields(
            fields.0,
            fields.1.as_deref(),
            fields.2,
            fields.3,
            fields.4,
            fields.5,
            None,
            None,
            fields.6,
        )
        .ok()
    }

    #[test]
    fn reads_what_a_json_parser_reads_and_never_panics() {
        let ours = r#"{"keyturn":1,"state":"held","token":"t\u00e9\ud83d\ude00x","fence":7,"at":12,"lease":300,"extra":[]}"#;
        let seeds = [
            Record::held("0123456789abcdef0123456789abcdef", 12, 1_764_452_000_000.0).encode(),
            Record::free(3, 5.0).encode(),
            Record {
                n: 3,
                ..Record::held("0123456789abcdef0123456789abcdef", 9, 4.0)
            }
            .encode(),
            ours.replace(",\"extra\":[]", ""),
            " { \"at\" : 1 , \"fence\":2,\"state\":\"free\",\"token\":\"\",\"keyturn\":1 } ".into(),
        ];
        use crate::engine::random::Random;
        let random = crate::engine::random::SeededRandom::new(7);
        let below = |n: usize| ((random.unit() * n as f64) as usize).min(n.saturating_sub(1));
        let alphabet = b"{}[]\":,\\ 0123456789.eE+-uabcdefhlnrst\x01";
        for seed in &seeds {
            assert_eq!(Record::decode(seed).ok(), by_serde(seed), "{seed}");
            for _ in 0..3000 {
                let mut bytes = seed.as_bytes().to_vec();
                for _ in 0..1 + below(3) {
                    let at = below(bytes.len() + 1);
                    let byte = alphabet[below(alphabet.len())];
                    match below(3) {
                        0 if at < bytes.len() => bytes[at] = byte,
                        1 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        _ => bytes.insert(at, byte),
                    }
                }
                let Ok(text) = String::from_utf8(bytes) else {
                    continue;
                };
                assert_eq!(Record::decode(&text).ok(), by_serde(&text), "{text}");
            }
        }
    }

    #[test]
    fn refuses_what_is_not_ours() {
        for text in [
            "",
            "locked",
            "{}",
            "[]",
            r#"{"keyturn":2,"state":"held","token":"t","fence":1,"at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"taken","token":"t","fence":1,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"","fence":1,"at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":0,"at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1.5,"at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":9007199254740992,"at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":"1","at":0,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1,"lease":5}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1,"at":0,"lease":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1,"at":0,"lease":5} trailing"#,
            r#"{"keyturn":1,"state":"held","token":"\ud800","fence":1,"at":0,"lease":5}"#,
            r#"{"pid":123,"token":"from board-lock.ts's lock file"}"#,
            r#"{"keyturn":1,"state":"free","token":"","fence":1,"at":0,"n":0}"#,
            r#"{"keyturn":1,"state":"free","token":"","fence":1,"at":0,"n":2.5}"#,
            r#"{"keyturn":1,"state":"free","token":"","fence":1,"at":0,"n":"2"}"#,
        ] {
            assert!(Record::decode(text).is_err(), "{text}");
        }
    }
}
