//! Request bodies with size limits, and HTTP `Range` headers.

use std::io::Read;
use std::ops::Range;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::sync::{mpsc, Semaphore};

use crate::error::{ServerError, ServerResult};

/// The declared `Content-Length`, if any and well formed.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Reads a whole body into memory, refusing with 413 as soon as it is known to exceed
/// `limit`: from `Content-Length` before reading anything, else while reading.
pub async fn read_limited(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
    what: &str,
) -> ServerResult<Bytes> {
    let mut frames = LimitedBody::new(body, headers, limit as u64, what)?;
    // What a client declares is not what it sends: reserve little up front.
    let reserve = frames.declared.unwrap_or(0).min(PREALLOCATE_MAX) as usize;
    let mut buf = Vec::with_capacity(reserve);
    while let Some(data) = frames.next().await? {
        buf.extend_from_slice(&data);
    }
    frames.finish()?;
    Ok(Bytes::from(buf))
}

/// The most memory reserved for a body before it arrives.
const PREALLOCATE_MAX: u64 = 1 << 20;

/// The largest body read from a request without a credential (`--anonymous-read`): a Batch
/// download request of git-lfs's 100 objects is about 10 KiB.
pub const ANONYMOUS_BODY_MAX: usize = 64 * 1024;

/// Hands a body, as it arrives, to `work` on a blocking thread (a few frames behind the
/// network), with the limits of [`read_limited`]. A body that fails, ends short of its
/// `Content-Length` or exceeds `limit` reaches `work` as a read error, and that reason is
/// what is returned; otherwise `work`'s result is.
pub async fn read_blocking<T, F>(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    what: &str,
    work: F,
) -> ServerResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut BodyReader) -> ServerResult<T> + Send + 'static,
{
    pump_to_blocking(body, headers, limit, what, None, work).await
}

/// [`read_blocking`], except that `work` sees the end of the body only once one of `slots`
/// is held, until `work` returns. Receiving takes no slot, so clients that stall in the
/// middle of a body cannot hold the slots that bound validation (their connections time
/// out on their own).
pub async fn read_blocking_then_slot<T, F>(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    what: &str,
    slots: &Semaphore,
    work: F,
) -> ServerResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut BodyReader) -> ServerResult<T> + Send + 'static,
{
    pump_to_blocking(body, headers, limit, what, Some(slots), work).await
}

/// [`read_blocking`] for work that holds much memory while it runs (basic-upload
/// conversions): the body is held back, without a slot, until `start_after` bytes of it (or
/// all of it) have arrived; only then is one of `slots` taken and `work` started, and the
/// slot is held until `work` returns. A client that declares a large body and sends a few
/// bytes holds no slot (its connection times out on its own); the memory held back per
/// request is at most `start_after` plus one frame.
pub async fn read_blocking_slot_when_flowing<T, F>(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    what: &str,
    slots: &Semaphore,
    start_after: u64,
    work: F,
) -> ServerResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut BodyReader) -> ServerResult<T> + Send + 'static,
{
    let mut frames = LimitedBody::new(body, headers, limit, what)?;
    let mut held = Vec::new();
    let mut ended = false;
    while frames.received < start_after {
        match frames.next().await? {
            Some(data) => held.push(data),
            None => {
                frames.finish()?;
                ended = true;
                break;
            }
        }
    }
    let _permit = slots
        .acquire()
        .await
        .map_err(|_| ServerError::Unavailable("the server is shutting down".into()))?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let worker = tokio::task::spawn_blocking(move || work(&mut BodyReader::new(rx)));
    let pumped = async {
        for data in held {
            if tx.send(Ok(data)).await.is_err() {
                return Ok(());
            }
        }
        if ended {
            return Ok(());
        }
        while let Some(data) = frames.next().await? {
            if tx.send(Ok(data)).await.is_err() {
                return Ok(()); // `work` stopped; its result says why
            }
        }
        frames.finish().map(drop)
    }
    .await;
    if let Err(e) = &pumped {
        // `work` must not take a cut-short body for a whole one.
        let _ = tx.send(Err(e.to_string())).await;
    }
    drop(tx);
    let worked = worker.await?;
    pumped?;
    worked
}

async fn pump_to_blocking<T, F>(
    body: Body,
    headers: &HeaderMap,
    limit: u64,
    what: &str,
    slots: Option<&Semaphore>,
    work: F,
) -> ServerResult<T>
where
    T: Send + 'static,
    F: FnOnce(&mut BodyReader) -> ServerResult<T> + Send + 'static,
{
    let mut frames = LimitedBody::new(body, headers, limit, what)?;
    let (tx, rx) = mpsc::channel(QUEUE);
    let worker = tokio::task::spawn_blocking(move || work(&mut BodyReader::new(rx)));
    let pumped = async {
        while let Some(data) = frames.next().await? {
            if tx.send(Ok(data)).await.is_err() {
                return Ok(()); // `work` stopped; its result says why
            }
        }
        frames.finish().map(drop)
    }
    .await;
    let mut permit = None;
    let pumped = match (pumped, slots) {
        (Ok(()), Some(slots)) => match slots.acquire().await {
            Ok(p) => {
                permit = Some(p);
                Ok(())
            }
            Err(_) => Err(ServerError::Unavailable(
                "the server is shutting down".into(),
            )),
        },
        (pumped, _) => pumped,
    };
    if let Err(e) = &pumped {
        // `work` must not take a cut-short body for a whole one.
        let _ = tx.send(Err(e.to_string())).await;
    }
    drop(tx);
    let worked = worker.await?;
    drop(permit);
    pumped?;
    worked
}

/// Frames queued between the network and the blocking reader (each up to a few hundred KiB).
const QUEUE: usize = 32;

/// A request body on a blocking thread: as [`Bytes`] frames (no copy) or through [`Read`].
pub struct BodyReader {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    current: Bytes,
}

impl BodyReader {
    fn new(rx: mpsc::Receiver<Result<Bytes, String>>) -> BodyReader {
        BodyReader {
            rx,
            current: Bytes::new(),
        }
    }

    /// The next frame, `None` at the end of the body.
    pub fn next_bytes(&mut self) -> std::io::Result<Option<Bytes>> {
        if !self.current.is_empty() {
            return Ok(Some(std::mem::take(&mut self.current)));
        }
        match self.rx.blocking_recv() {
            None => Ok(None),
            Some(Ok(data)) => Ok(Some(data)),
            Some(Err(reason)) => Err(std::io::Error::other(reason)),
        }
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.next_bytes()? {
                None => return Ok(0),
                Some(data) => self.current = data,
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// A request body read frame by frame, counting bytes against a limit and the declared
/// `Content-Length`.
struct LimitedBody<'a> {
    body: Body,
    declared: Option<u64>,
    limit: u64,
    what: &'a str,
    received: u64,
}

impl<'a> LimitedBody<'a> {
    fn new(body: Body, headers: &HeaderMap, limit: u64, what: &'a str) -> ServerResult<Self> {
        let declared = check_declared(headers, limit, what)?;
        Ok(LimitedBody {
            body,
            declared,
            limit,
            what,
            received: 0,
        })
    }

    async fn next(&mut self) -> ServerResult<Option<Bytes>> {
        while let Some(frame) = self.body.frame().await {
            let frame = frame
                .map_err(|e| ServerError::bad_request(format!("reading the {}: {e}", self.what)))?;
            if let Ok(data) = frame.into_data() {
                self.received += data.len() as u64;
                if self.received > self.limit {
                    return Err(too_large(self.limit, self.what));
                }
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// The body ended: checks it against its `Content-Length`; returns its length.
    fn finish(&self) -> ServerResult<u64> {
        if self.declared.is_some_and(|n| n != self.received) {
            return Err(ServerError::bad_request(format!(
                "{} ended after {} bytes, before its Content-Length",
                self.what, self.received
            )));
        }
        Ok(self.received)
    }
}

/// Refuses a body whose `Content-Length` exceeds `limit` (413) before any of it is read;
/// returns the declared length.
pub fn check_declared(headers: &HeaderMap, limit: u64, what: &str) -> ServerResult<Option<u64>> {
    let declared = content_length(headers);
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large(limit, what));
    }
    Ok(declared)
}

fn too_large(limit: u64, what: &str) -> ServerError {
    ServerError::PayloadTooLarge(format!("{what} is larger than the limit of {limit} bytes"))
}

/// Parses a `Range` header against an object of `len` bytes, as a half-open range, the
/// way RFC 9110 (section 14.2) asks: a header that is not one well-formed `bytes` range
/// (another unit, `bytes=5-2`, several ranges, garbage) is ignored, `Ok(None)`, and the
/// whole object is served; a well-formed range that selects nothing is 416. Positions too
/// large for 64 bits are as good as infinite.
pub fn parse_range(headers: &HeaderMap, len: u64) -> ServerResult<Option<Range<u64>>> {
    let Some(value) = headers.get(header::RANGE) else {
        return Ok(None);
    };
    let Some(spec) = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().strip_prefix("bytes="))
        .map(str::trim)
    else {
        return Ok(None);
    };
    let Some((start, end)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (start, end) = (start.trim(), end.trim());
    let unsatisfiable = || ServerError::RangeNotSatisfiable {
        message: format!("range {spec} is not satisfiable for {len} bytes"),
        size: len,
    };
    let range = if start.is_empty() {
        // bytes=-N: the last N bytes.
        let Some(n) = position(end) else {
            return Ok(None);
        };
        if n == 0 || len == 0 {
            return Err(unsatisfiable());
        }
        len.saturating_sub(n)..len
    } else {
        let Some(start) = position(start) else {
            return Ok(None);
        };
        let end = match end {
            "" => u64::MAX,
            e => match position(e) {
                Some(e) => e,
                None => return Ok(None),
            },
        };
        if end < start {
            return Ok(None);
        }
        if start >= len {
            return Err(unsatisfiable());
        }
        start..end.saturating_add(1).min(len)
    };
    Ok(Some(range))
}

/// A byte position: ASCII digits only, saturating at `u64::MAX`.
fn position(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(v: &str, len: u64) -> ServerResult<Option<Range<u64>>> {
        let mut h = HeaderMap::new();
        h.insert(header::RANGE, v.parse().unwrap());
        parse_range(&h, len)
    }

    #[test]
    fn ranges() {
        assert_eq!(range("bytes=0-9", 100).unwrap(), Some(0..10));
        assert_eq!(range("bytes=90-200", 100).unwrap(), Some(90..100));
        assert_eq!(range("bytes=10-", 100).unwrap(), Some(10..100));
        assert_eq!(range("bytes=-10", 100).unwrap(), Some(90..100));
        assert_eq!(range("bytes=-1000", 100).unwrap(), Some(0..100));
        assert!(matches!(
            range("bytes=100-", 100),
            Err(ServerError::RangeNotSatisfiable { .. })
        ));
        assert!(matches!(
            range("bytes=0-0", 0),
            Err(ServerError::RangeNotSatisfiable { .. })
        ));
        assert!(parse_range(&HeaderMap::new(), 5).unwrap().is_none());
    }

    #[test]
    fn odd_ranges_are_ignored_or_saturate_as_rfc_9110_says() {
        // Not one well-formed bytes range: ignored, the whole object is served.
        for odd in [
            "bytes=5-2",
            "items=0-1",
            "bytes=0-1,3-4",
            "bytes=a-b",
            "bytes=+1-2",
            "bytes=--1",
            "bytes=",
            "bytes=-",
            "0-1",
        ] {
            assert_eq!(range(odd, 100).unwrap(), None, "{odd}");
        }
        // Huge numbers are well formed: past the end is 416, a huge end is the end.
        assert!(matches!(
            range("bytes=99999999999999999999999-", 100),
            Err(ServerError::RangeNotSatisfiable { .. })
        ));
        assert_eq!(
            range("bytes=5-99999999999999999999999", 100).unwrap(),
            Some(5..100)
        );
        assert_eq!(
            range("bytes=-99999999999999999999999", 100).unwrap(),
            Some(0..100)
        );
    }
}
