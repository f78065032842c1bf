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
//! - `fence`: rises by one with every acquisition of the name — create, re-acquire, takeover,
//!   hand-off — so a protected resource can refuse a write carrying an older fence.
//! - `at`: when the record was written, in milliseconds of the writer's clock (`Date.now()` by
//!   default): a held record older than its lease is taken over. No two writes of a record carry
//!   the same bytes: a holder's renewal moves `at` by at least 1, so a store whose version is a
//!   hash of the value never sees a version come back.
//! - `lease`: the lease its holder promised itself (its `staleMs`, whole milliseconds), on held
//!   records: a taker waits out the longer of it and its own. Records written before it existed
//!   have none, and are read all the same.
//!
//! Unknown fields are ignored, so a later version can add some; anything that does not parse
//! as this format is a record that is not ours and is never released by us.

use core::fmt;

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
    /// The lease its holder promised itself, in milliseconds (held records; `None` when the
    /// record predates the field).
    pub lease: Option<u64>,
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
    /// A held record.
    #[cfg(test)]
    pub fn held(token: &str, fence: u64, at: f64) -> Record {
        Record {
            held: true,
            token: token.to_owned(),
            fence,
            at,
            lease: None,
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
        }
    }

    /// The record as stored.
    #[cfg(test)]
    pub fn encode(&self) -> String {
        encode(self.held, &self.token, self.fence, self.at, self.lease)
    }

    /// `Record::held(token, fence, at).encode()`, without the record (and its copy of the
    /// token).
    #[cfg(test)]
    pub fn encode_held(token: &str, fence: u64, at: f64) -> String {
        encode(true, token, fence, at, None)
    }

    /// Reads a stored text; an error for anything that is not a record of this format.
    pub fn decode(text: &str) -> Result<Record, NotARecord> {
        let fields = parse_flat_object(text)?;
        let mut format = None;
        let mut state = None;
        let mut token = None;
        let mut fence = None;
        let mut at = None;
        let mut lease = None;
        for (name, value) in fields {
            match (name.as_str(), value) {
                ("keyturn", Value::Number(n)) => format = Some(n),
                ("state", Value::String(s)) => state = Some(s),
                ("token", Value::String(s)) => token = Some(s),
                ("fence", Value::Number(n)) => fence = Some(n),
                ("at", Value::Number(n)) => at = Some(n),
                ("lease", Value::Number(n)) => lease = Some(n),
                ("keyturn" | "state" | "token" | "fence" | "at" | "lease", _) => {
                    return Err(NotARecord("a field has the wrong type"))
                }
                _ => {}
            }
        }
        Record::from_fields(format, state.as_deref(), token, fence, at, lease)
    }
}

impl Record {
    /// The record with these fields, as a parser found them (`None` where a field is absent or
    /// of another type): the checks of [`Record::decode`], for a caller that parsed the JSON
    /// itself (the JS package uses `JSON.parse`).
    pub fn from_fields(
        format: Option<f64>,
        state: Option<&str>,
        token: Option<String>,
        fence: Option<f64>,
        at: Option<f64>,
        lease: Option<f64>,
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
            None => None,
            Some(ms) if ms >= 1.0 && ms <= MAX_FENCE as f64 && ms.fract() == 0.0 => Some(ms as u64),
            Some(_) => return Err(NotARecord("lease is not a whole number of milliseconds")),
        };
        Ok(Record {
            held,
            token,
            fence: fence as u64,
            at,
            lease,
        })
    }
}

enum Value {
    String(String),
    Number(f64),
    Other,
}

/// The stored text of a record with these fields; a token that is not ours is escaped so the
/// JSON stays valid.
#[cfg(test)]
fn encode(held: bool, token: &str, fence: u64, at: f64, lease: Option<u64>) -> String {
    if token.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        return encode_ours(held, token, fence, at, lease);
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
    encode_ours(held, &escaped, fence, at, lease)
}

/// [`encode`] for a token of ours (hex, or empty), which needs no escaping: what the lock core
/// writes, and all it links into the wasm.
pub(crate) fn encode_ours(
    held: bool,
    token: &str,
    fence: u64,
    at: f64,
    lease: Option<u64>,
) -> String {
    // Room for the longest record (a 32-digit token, 20-digit numbers): one allocation.
    let mut out = String::with_capacity(160);
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
    out.push('}');
    out
}

/// A JSON object whose values are scalars — all a record is. Nested values are refused.
fn parse_flat_object(text: &str) -> Result<Vec<(String, Value)>, NotARecord> {
    const BAD: NotARecord = NotARecord("not a flat JSON object");
    let mut chars = text.chars().peekable();
    let mut fields = Vec::new();
    let skip_ws = |chars: &mut core::iter::Peekable<core::str::Chars<'_>>| {
        while chars
            .peek()
            .is_some_and(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
        {
            chars.next();
        }
    };
    skip_ws(&mut chars);
    if chars.next() != Some('{') {
        return Err(BAD);
    }
    skip_ws(&mut chars);
    if chars.peek() == Some(&'}') {
        chars.next();
    } else {
        loop {
            skip_ws(&mut chars);
            if chars.next() != Some('"') {
                return Err(BAD);
            }
            let name = parse_string(&mut chars)?;
            skip_ws(&mut chars);
            if chars.next() != Some(':') {
                return Err(BAD);
            }
            skip_ws(&mut chars);
            let value = parse_scalar(&mut chars)?;
            fields.push((name, value));
            skip_ws(&mut chars);
            match chars.next() {
                Some(',') => continue,
                Some('}') => break,
                _ => return Err(BAD),
            }
        }
    }
    skip_ws(&mut chars);
    if chars.next().is_some() {
        return Err(BAD);
    }
    Ok(fields)
}

type Chars<'a> = core::iter::Peekable<core::str::Chars<'a>>;

/// A scalar value: a string, a whole number, or one of the words (read as of another type).
fn parse_scalar(chars: &mut Chars<'_>) -> Result<Value, NotARecord> {
    const BAD: NotARecord = NotARecord("not a flat JSON object");
    match chars.peek() {
        Some('"') => {
            chars.next();
            Ok(Value::String(parse_string(chars)?))
        }
        Some(c) if *c == '-' || c.is_ascii_digit() => parse_number(chars),
        _ => {
            let word = ["true", "false", "null"]
                .into_iter()
                .find(|word| text_starts(chars, word))
                .ok_or(BAD)?;
            word.chars().for_each(|_| {
                chars.next();
            });
            Ok(Value::Other)
        }
    }
}

/// A number. Every number of a record is a whole number: a fraction or an exponent reads as a
/// field of the wrong type. (No float parser: ~10 KB of wasm.)
fn parse_number(chars: &mut Chars<'_>) -> Result<Value, NotARecord> {
    let negative = chars.next_if_eq(&'-').is_some();
    let mut whole: u64 = 0;
    let mut digits = 0;
    while let Some(digit) = chars.peek().and_then(|c| c.to_digit(10)) {
        chars.next();
        digits += 1;
        whole = whole.saturating_mul(10).saturating_add(u64::from(digit));
    }
    if digits == 0 {
        return Err(NotARecord("not a flat JSON object"));
    }
    if chars.peek().is_some_and(|c| matches!(c, '.' | 'e' | 'E')) {
        while chars
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        {
            chars.next();
        }
        return Ok(Value::Other);
    }
    if whole > MAX_FENCE {
        return Ok(Value::Other);
    }
    let number = whole as f64;
    Ok(Value::Number(if negative { -number } else { number }))
}

fn text_starts(chars: &core::iter::Peekable<core::str::Chars<'_>>, word: &str) -> bool {
    chars.clone().take(word.len()).eq(word.chars())
}

/// The rest of a JSON string whose opening quote was read.
fn parse_string(
    chars: &mut core::iter::Peekable<core::str::Chars<'_>>,
) -> Result<String, NotARecord> {
    const BAD: NotARecord = NotARecord("a bad JSON string");
    let mut out = String::new();
    loop {
        match chars.next().ok_or(BAD)? {
            '"' => return Ok(out),
            '\\' => match chars.next().ok_or(BAD)? {
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                '/' => out.push('/'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'u' => {
                    let unit = |chars: &mut core::iter::Peekable<core::str::Chars<'_>>| -> Result<u32, NotARecord> {
                        let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                        if hex.len() != 4 {
                            return Err(BAD);
                        }
                        u32::from_str_radix(&hex, 16).map_err(|_| BAD)
                    };
                    let first = unit(chars)?;
                    let code = if (0xD800..0xDC00).contains(&first) {
                        if chars.next() != Some('\\') || chars.next() != Some('u') {
                            return Err(BAD);
                        }
                        let second = unit(chars)?;
                        if !(0xDC00..0xE000).contains(&second) {
                            return Err(BAD);
                        }
                        0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    } else {
                        first
                    };
                    out.push(char::from_u32(code).ok_or(BAD)?);
                }
                _ => return Err(BAD),
            },
            c if (c as u32) < 0x20 => return Err(BAD),
            c => out.push(c),
        }
    }
}

/// Appends `n` in decimal, without the allocation `to_string` makes.
pub(crate) fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Pushed one by one: no UTF-8 check to link in for what are ASCII digits.
    for &digit in &digits[at..] {
        out.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortcuts_write_what_the_records_do() {
        let (token, at) = ("0123456789abcdef0123456789abcdef", 1_764_452_000_123.0);
        assert_eq!(
            Record::encode_held(token, 7, at),
            Record::held(token, 7, at).encode()
        );
        assert_eq!(
            Record::encode_held("a\"b", 1, 0.0),
            Record::held("a\"b", 1, 0.0).encode()
        );
        let free = Record::free(7, at + 1.0);
        assert!(!free.held && free.token.is_empty() && free.fence == 7 && free.at == at + 1.0);
    }

    #[test]
    fn round_trips() {
        let held = Record::held("0123456789abcdef0123456789abcdef", 12, 1_764_452_000_000.0);
        let text = held.encode();
        assert_eq!(
            text,
            r#"{"keyturn":1,"state":"held","token":"0123456789abcdef0123456789abcdef","fence":12,"at":1764452000000}"#
        );
        assert_eq!(Record::decode(&text), Ok(held.clone()));
        let free = Record::free(held.fence, 1_764_452_000_500.0);
        assert_eq!(Record::decode(&free.encode()), Ok(free));
        for (fence, at) in [
            (0, 0.0),
            (9, 9.99),
            (10, 10.0),
            (9_007_199_254_740_991, 1e15),
        ] {
            let text = Record::held("t", fence, at).encode();
            let expected = format!(
                r#"{{"keyturn":1,"state":"held","token":"t","fence":{fence},"at":{}}}"#,
                at.floor() as u64
            );
            assert_eq!(text, expected);
        }
    }

    #[test]
    fn tolerates_whitespace_order_escapes_and_unknown_fields() {
        let text = "{ \"fence\" : 3 , \"extra\": [1] }";
        assert!(Record::decode(text).is_err(), "nested values are not ours");
        let text = " {\"at\": 5, \"fence\": 3, \"future\": null, \"token\": \"a\\u0062\\\"\", \"state\": \"held\", \"keyturn\": 1}\n";
        let record = Record::decode(text).unwrap();
        assert_eq!(
            (record.token.as_str(), record.fence, record.held),
            ("ab\"", 3, true)
        );
        let odd = Record::held("a\"b\\c\u{1}", 1, 0.0);
        assert_eq!(Record::decode(&odd.encode()), Ok(odd));
    }

    #[test]
    fn refuses_what_is_not_ours() {
        for text in [
            "",
            "locked",
            "{}",
            "[]",
            r#"{"keyturn":2,"state":"held","token":"t","fence":1,"at":0}"#,
            r#"{"keyturn":1,"state":"taken","token":"t","fence":1,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"","fence":1,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":0,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1.5,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":9007199254740992,"at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":"1","at":0}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1}"#,
            r#"{"keyturn":1,"state":"held","token":"t","fence":1,"at":0} trailing"#,
            r#"{"keyturn":1,"state":"held","token":"\ud800","fence":1,"at":0}"#,
            r#"{"pid":123,"token":"from board-lock.ts's lock file"}"#,
        ] {
            assert!(Record::decode(text).is_err(), "{text}");
        }
    }
}
