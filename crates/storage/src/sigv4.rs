//! AWS Signature Version 4 presigned GET URLs that also sign request headers (a `Range`), so
//! that the store itself refuses the URL with any other value of them. The `object_store`
//! crate presigns the `host` header only; this is the same algorithm with more headers
//! ("Authenticating Requests: Using Query Parameters" in the S3 API reference), checked
//! against AWS's documented example values in the tests below.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Who signs, and for which region.
pub struct Credentials<'a> {
    pub key_id: &'a str,
    pub secret_key: &'a str,
    /// A session token (temporary credentials), sent as `X-Amz-Security-Token`.
    pub token: Option<&'a str>,
    pub region: &'a str,
}

/// A presigned GET of `url` (an `http(s)://host[:port]/path` without query) valid for
/// `expires_in` seconds from `now` (unix seconds); `headers` (lower-case names, each sent with
/// exactly this value) are signed besides `host`.
pub fn presign_get(
    creds: &Credentials<'_>,
    url: &str,
    headers: &[(&str, &str)],
    now: u64,
    expires_in: u64,
) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not an absolute URL: {url}"))?;
    if rest.contains('?') {
        return Err(format!("URL already has a query: {url}"));
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    // The Host header a client sends leaves out the scheme's default port.
    let host = match (scheme, authority.rsplit_once(':')) {
        ("http", Some((h, "80"))) | ("https", Some((h, "443"))) => h,
        _ => authority,
    };
    let datetime = git_xet_io::time::rfc3339(now).replace(['-', ':'], "");
    let scope = format!("{}/{}/s3/aws4_request", &datetime[..8], creds.region);
    let mut signed: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .chain([("host".to_string(), host.to_string())])
        .collect();
    signed.sort();
    let signed_names = signed
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let mut query = vec![
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256".to_string()),
        ("X-Amz-Credential", format!("{}/{scope}", creds.key_id)),
        ("X-Amz-Date", datetime.clone()),
        ("X-Amz-Expires", expires_in.to_string()),
        ("X-Amz-SignedHeaders", signed_names.clone()),
    ];
    if let Some(token) = creds.token {
        query.push(("X-Amz-Security-Token", token.to_string()));
    }
    query.sort();
    let query = query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k, true), encode(v, true)))
        .collect::<Vec<_>>()
        .join("&");
    let canonical_headers: String = signed.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
    let canonical = format!(
        "GET\n{}\n{query}\n{canonical_headers}\n{signed_names}\nUNSIGNED-PAYLOAD",
        encode(path, false)
    );
    let signature = sign(creds, &datetime, &scope, &canonical);
    Ok(format!(
        "{scheme}://{authority}{path}?{query}&X-Amz-Signature={signature}"
    ))
}

/// The hex signature of a canonical request.
fn sign(creds: &Credentials<'_>, datetime: &str, scope: &str, canonical: &str) -> String {
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{datetime}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(
        format!("AWS4{}", creds.secret_key).as_bytes(),
        &datetime.as_bytes()[..8],
    );
    for part in [creds.region, "s3", "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    hex(&hmac(&key, to_sign.as_bytes()))
}

/// SigV4's URI encoding: everything but unreserved characters, and `/` too unless it
/// separates path segments. A path is taken as already encoded (S3 does not encode twice),
/// so its `%` escapes pass through.
fn encode(s: &str, slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' | b'%' if !slash => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// HMAC-SHA256 (RFC 2104).
fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's example credentials and date (Fri, 24 May 2013 00:00:00 GMT).
    const EXAMPLE: Credentials<'static> = Credentials {
        key_id: "AKIAIOSFODNN7EXAMPLE",
        secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        token: None,
        region: "us-east-1",
    };
    const MAY_24_2013: u64 = 1_369_353_600;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        let mac = hmac(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex(&mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn the_documented_presigned_url_example() {
        // "Authenticating Requests: Using Query Parameters", example: GET test.txt.
        let url = presign_get(
            &EXAMPLE,
            "https://examplebucket.s3.amazonaws.com/test.txt",
            &[],
            MAY_24_2013,
            86400,
        )
        .unwrap();
        assert_eq!(
            url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
             &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn the_documented_get_object_example_with_a_signed_range() {
        // "Signature Calculations for the Authorization Header", example: GET Object with
        // `Range: bytes=0-9` (the same signing, the signature in a header instead).
        let canonical = "GET\n/test.txt\n\n\
             host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n\
             x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
             x-amz-date:20130524T000000Z\n\n\
             host;range;x-amz-content-sha256;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let sig = sign(
            &EXAMPLE,
            "20130524T000000Z",
            "20130524/us-east-1/s3/aws4_request",
            canonical,
        );
        assert_eq!(
            sig,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn extra_headers_are_signed_and_default_ports_left_out_of_host() {
        let with_range = |range: &str| {
            presign_get(
                &EXAMPLE,
                "http://127.0.0.1:3900/b/k.xorb",
                &[("range", range)],
                MAY_24_2013,
                60,
            )
            .unwrap()
        };
        let a = with_range("bytes=0-9");
        assert!(a.contains("X-Amz-SignedHeaders=host%3Brange"), "{a}");
        assert!(a.starts_with("http://127.0.0.1:3900/b/k.xorb?"));
        assert_ne!(
            a,
            with_range("bytes=0-10"),
            "the range is under the signature"
        );
        let default_port = presign_get(&EXAMPLE, "https://h:443/k", &[], 0, 1).unwrap();
        let no_port = presign_get(&EXAMPLE, "https://h/k", &[], 0, 1).unwrap();
        let sig = |u: &str| u.rsplit_once('=').unwrap().1.to_string();
        assert_eq!(sig(&default_port), sig(&no_port));
        let token = Credentials {
            token: Some("tok/en"),
            ..EXAMPLE
        };
        let url = presign_get(&token, "https://h/k", &[], 0, 1).unwrap();
        assert!(url.contains("X-Amz-Security-Token=tok%2Fen"), "{url}");
        assert!(presign_get(&EXAMPLE, "h/k", &[], 0, 1).is_err());
        assert!(presign_get(&EXAMPLE, "https://h/k?x=1", &[], 0, 1).is_err());
    }
}
