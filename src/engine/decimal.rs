//! Whole numbers in decimal, written without `core::fmt` (records, keys and asks carry them).

/// Appends `n` in decimal, without the allocation `to_string` makes.
pub(crate) fn push_decimal(out: &mut String, mut n: u64) {
    // Least significant first, then pushed one by one from the top: no UTF-8 check to link in
    // for what are ASCII digits, and no index that could panic.
    let mut digits = [0u8; 20];
    let mut count = 0;
    for digit in digits.iter_mut() {
        *digit = b'0' + (n % 10) as u8;
        count += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &digit in digits.iter().take(count).rev() {
        out.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_numbers_in_decimal() {
        for n in [0, 7, 10, 99, 1_764_452_000_123, u64::MAX] {
            let mut out = String::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }
}
