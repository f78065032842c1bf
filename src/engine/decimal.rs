//! Whole numbers in decimal, written without `core::fmt` (records, keys and asks carry them),
//! and digits appended at once.

/// Appends `n` in decimal, without the allocation `to_string` makes.
pub(crate) fn push_decimal(out: &mut String, mut n: u64) {
    // Least significant first, from the end of a buffer, then appended at once.
    let mut digits = [b'0'; 20];
    let mut start = digits.len();
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    push_chars(out, digits.get(start..).unwrap_or_default());
}

/// Appends each byte as the character of its code (as `char::from` makes it): all at once
/// when they are ASCII, as digits are. A push per character costs a capacity check and a
/// length update each, several times what making a digit costs; and `str::from_utf8` would
/// link a UTF-8 check into the wasm for what `is_ascii` answers.
pub(crate) fn push_chars(out: &mut String, bytes: &[u8]) {
    if bytes.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        out.push_str(unsafe { core::str::from_utf8_unchecked(bytes) });
    } else {
        out.extend(bytes.iter().map(|&byte| char::from(byte)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_numbers_in_decimal() {
        let mut numbers = vec![
            0,
            7,
            10,
            99,
            1_764_452_000_123,
            1_796_517_956_589_000,
            u64::MAX,
        ];
        // Around each power of ten, where a number gains a digit.
        let mut power = 1u64;
        for _ in 0..20 {
            numbers.extend([power - 1, power, power + 1]);
            power = power.saturating_mul(10);
        }
        for n in numbers {
            let mut out = String::from("x");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

    #[test]
    fn appends_each_byte_as_its_character() {
        let mut out = String::from("x");
        push_chars(&mut out, b"0123abcdef");
        assert_eq!(out, "x0123abcdef");
        // Not ASCII: each byte still its own character, as `char::from` makes it.
        push_chars(&mut out, &[b'a', 0xe9, 0xff]);
        assert_eq!(out, "x0123abcdefa\u{e9}\u{ff}");
    }
}
