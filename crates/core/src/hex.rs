//! Hex digits, read one way everywhere: LFS object ids ([`crate::lfs::parse_oid`]), XET
//! hashes ([`crate::MerkleHash::from_hex`]) and percent-escapes in URLs.

/// Lowercase hex digits by value, as every id and hash is written.
pub const LOWER_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` in lowercase hex, two digits per byte in order (LFS object ids).
pub fn encode_lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(LOWER_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(LOWER_DIGITS[usize::from(b & 0xF)]));
    }
    out
}

/// The value of a hex digit of either case (`0-9`, `a-f`, `A-F`); nothing else (no sign,
/// no space, as `u8::from_str_radix` would take).
pub fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// The value of a lowercase hex digit (`0-9`, `a-f`): LFS object ids, which git-lfs writes
/// and compares in lowercase only.
pub fn lower_digit(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'F' => None,
        _ => digit(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_in_order_in_lowercase() {
        assert_eq!(encode_lower(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(encode_lower(&[]), "");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(encode_lower(&all), expected);
    }

    #[test]
    fn digits_of_either_case_and_nothing_else() {
        for (c, value) in [
            (b'0', 0),
            (b'9', 9),
            (b'a', 10),
            (b'f', 15),
            (b'A', 10),
            (b'F', 15),
        ] {
            assert_eq!(digit(c), Some(value), "{}", c as char);
        }
        for c in [
            b'g', b'G', b'+', b'-', b' ', b'x', 0, 0xff, b'/', b':', b'@', b'`',
        ] {
            assert_eq!(digit(c), None, "{c}");
            assert_eq!(lower_digit(c), None, "{c}");
        }
        assert_eq!(lower_digit(b'e'), Some(14));
        assert_eq!(lower_digit(b'E'), None);
    }
}
