//! `git cat-file --batch` output read whole, as the Hub and the web view read a few small
//! hosted blobs at once: `<oid> <type> <size>\n<content>\n` per object asked, in order, or
//! `<name> missing\n`.

/// Each asked object's content (`None`: git said it is missing, or its header did not
/// parse), in the order asked; ends early where the output is cut short.
pub fn objects(out: &[u8]) -> impl Iterator<Item = Option<&[u8]>> {
    let mut rest = out;
    std::iter::from_fn(move || {
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let header = std::str::from_utf8(&rest[..nl]).ok();
        rest = &rest[nl + 1..];
        let Some(size) = header
            .and_then(|h| h.split(' ').nth(2))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            return Some(None);
        };
        let content = rest.get(..size)?;
        rest = rest.get(size + 1..).unwrap_or(&[]);
        Some(Some(content))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_in_order_missing_ones_as_none_and_a_cut_ends_them() {
        let out = b"aaaa blob 3\nabc\nbbbb missing\ncccc blob 0\n\ndddd blob 9\nshort";
        let found: Vec<_> = objects(out).collect();
        assert_eq!(found, [Some(&b"abc"[..]), None, Some(b"")]);
        assert_eq!(objects(b"").count(), 0);
        assert_eq!(objects(b"x blob 99999999999999999999999\n").count(), 1);
    }
}
