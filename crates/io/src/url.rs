//! URL text both clients read: user names, passwords and ssh paths in remote URLs.

/// `%XX` decoded, `XX` two hex digits of either case (as git and Go's URL parser read user
/// names, passwords and paths); anything that is not such an escape is kept as written.
pub fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_valid_escapes_and_keeps_everything_else() {
        for (text, decoded) in [
            ("a%40b%3Ac", "a@b:c"),
            ("%2f%2F", "//"),
            ("%e2%82%ac", "€"),
            ("plain", "plain"),
            ("", ""),
            ("100%", "100%"),
            ("%4", "%4"),
            ("%zz%4", "%zz%4"),
            // Not hex digits, though `u8::from_str_radix` takes a sign.
            ("%+a", "%+a"),
            ("%-1", "%-1"),
            ("%%41", "%A"),
            // Invalid UTF-8 after decoding is replaced, never a panic.
            ("%ff", "\u{fffd}"),
            ("é%41", "éA"),
        ] {
            assert_eq!(percent_decode(text), decoded, "{text:?}");
        }
    }
}
