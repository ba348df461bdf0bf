//! A request id per HTTP request: the client's `X-Request-Id` when it is a sane token, else a
//! new random one. It is on every log line of the request (the `request` span), in the
//! `X-Request-Id` response header and in error bodies, so that what a user reports can be
//! matched with the server's log.

use axum::http::HeaderMap;

/// The request and response header.
pub const HEADER: &str = "x-request-id";
/// Longest id taken from a client; a longer one is replaced.
pub const MAX_LEN: usize = 64;

tokio::task_local! {
    static CURRENT: String;
}

/// The client's id if it is 1 to [`MAX_LEN`] characters of `A-Z a-z 0-9 - _ . :` (nothing a
/// log line or a header could be confused by), else a new one.
pub fn of_request(headers: &HeaderMap) -> String {
    headers
        .get(HEADER)
        .map(|v| v.as_bytes())
        .filter(|v| is_sane(v))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .unwrap_or_else(generate)
}

pub fn is_sane(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// 16 random hex digits.
pub fn generate() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Runs `f` (a request's handling) with `id` as the current request id.
pub async fn scope<F: std::future::Future>(id: String, f: F) -> F::Output {
    CURRENT.scope(id, f).await
}

/// The id of the request being handled by this task, if any.
pub fn current() -> Option<String> {
    CURRENT.try_with(|id| id.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn a_sane_client_id_is_kept_and_anything_else_replaced() {
        let with = |v: &[u8]| {
            let mut h = HeaderMap::new();
            h.insert(HEADER, HeaderValue::from_bytes(v).unwrap());
            of_request(&h)
        };
        assert_eq!(with(b"abc-123_x.y:z"), "abc-123_x.y:z");
        for bad in [&b"has space"[..], b"semi;colon", b"quote\"", &[b'a'; 65]] {
            let id = with(bad);
            assert_ne!(id.as_bytes(), bad);
            assert!(is_sane(id.as_bytes()) && id.len() == 16, "{id}");
        }
        assert_eq!(with(&[b'a'; 64]).len(), 64);
        let fresh = of_request(&HeaderMap::new());
        assert_ne!(fresh, of_request(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn the_id_is_current_only_inside_its_scope() {
        assert_eq!(current(), None);
        let inside = scope("r1".into(), async { current() }).await;
        assert_eq!(inside.as_deref(), Some("r1"));
    }
}
