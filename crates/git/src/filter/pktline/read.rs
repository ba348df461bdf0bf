//! Reading packets from git: gix-packetline decodes them into one fixed buffer of the
//! largest size git may send (never allocating from a length it read); this side decides
//! what the filter protocol allows.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gix_packetline::blocking_io::StreamingPeekableIter;
use gix_packetline::{decode, PacketLineRef};

use super::{protocol, MAX_PACKET};
use crate::GitError;

/// Text lists (headers, capabilities) longer than this are refused: git sends a handful.
const MAX_LIST_LINES: usize = 1024;

/// One packet as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    Flush,
    Data(&'a [u8]),
}

pub struct PktReader<R> {
    lines: StreamingPeekableIter<Counted<R>>,
    /// Bytes read from the input so far (shared with the `Counted` inside `lines`).
    consumed: Arc<AtomicU64>,
}

/// Counts what its reader yields. gix-packetline reports any early end as `UnexpectedEof`;
/// the count tells apart an end between packets (git is done), inside a header and inside a
/// payload.
struct Counted<R> {
    inner: R,
    consumed: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// What a packet gix-packetline refused means to git's side.
fn refused(e: decode::Error) -> GitError {
    match e {
        decode::Error::HexDecode { .. } => protocol("invalid packet length (not four hex digits)"),
        decode::Error::DataLengthLimitExceeded { length_in_bytes } => protocol(format!(
            "packet of {length_in_bytes} bytes is longer than the maximum {MAX_PACKET}"
        )),
        decode::Error::DataIsEmpty => protocol("empty data packet"),
        decode::Error::InvalidLineLength => {
            protocol("unexpected special packet 0003 (the filter protocol only uses flush)")
        }
        other => protocol(format!("invalid packet: {other}")),
    }
}

impl<R: Read> PktReader<R> {
    pub fn new(inner: R) -> PktReader<R> {
        let consumed = Arc::new(AtomicU64::new(0));
        let input = Counted {
            inner,
            consumed: consumed.clone(),
        };
        PktReader {
            // No stop packets: a flush is returned like any packet; no tracing of content.
            lines: StreamingPeekableIter::new(input, &[], false),
            consumed,
        }
    }

    /// The next packet; `None` when the input ends cleanly between packets.
    pub fn read(&mut self) -> Result<Option<Packet<'_>>, GitError> {
        let before = self.consumed.load(Ordering::Relaxed);
        let line = match self.lines.read_line() {
            // Only after a stop packet, and there are none.
            None => return Ok(None),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return match self.consumed.load(Ordering::Relaxed) - before {
                    0 => Ok(None),
                    1..=3 => Err(protocol("input ended inside a packet header")),
                    _ => Err(protocol("input ended inside a packet")),
                }
            }
            Some(Err(e)) => return Err(GitError::io("reading from git", e)),
            Some(Ok(Err(e))) => return Err(refused(e)),
            Some(Ok(Ok(line))) => line,
        };
        match line {
            PacketLineRef::Flush => Ok(Some(Packet::Flush)),
            PacketLineRef::Data(d) => Ok(Some(Packet::Data(d))),
            PacketLineRef::Delimiter => Err(protocol(
                "unexpected special packet 0001 (the filter protocol only uses flush)",
            )),
            PacketLineRef::ResponseEnd => Err(protocol(
                "unexpected special packet 0002 (the filter protocol only uses flush)",
            )),
        }
    }

    /// A packet that must be there (the input may not end here).
    fn read_required(&mut self) -> Result<Packet<'_>, GitError> {
        self.read()?
            .ok_or_else(|| protocol("git closed the connection in the middle of a request"))
    }

    /// Text lines up to a flush, each without its trailing newline. `None` when the input
    /// ends cleanly before the first line (git is done with the filter).
    pub fn read_list(&mut self) -> Result<Option<Vec<Vec<u8>>>, GitError> {
        let mut lines = Vec::new();
        loop {
            let packet = if lines.is_empty() {
                match self.read()? {
                    Some(p) => p,
                    None => return Ok(None),
                }
            } else {
                self.read_required()?
            };
            match packet {
                Packet::Flush => return Ok(Some(lines)),
                Packet::Data(d) => {
                    if lines.len() == MAX_LIST_LINES {
                        return Err(protocol(format!(
                            "more than {MAX_LIST_LINES} lines in one list"
                        )));
                    }
                    lines.push(d.strip_suffix(b"\n").unwrap_or(d).to_vec());
                }
            }
        }
    }

    /// Calls `each` with every content packet up to the flush that ends the content.
    /// An error from `each` does not stop the reading (git is still sending): the first
    /// one is returned once the content has been read to its end.
    pub fn read_content(
        &mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), GitError>,
    ) -> Result<Result<(), GitError>, GitError> {
        let mut first_error = None;
        loop {
            match self.read_required()? {
                Packet::Flush => return Ok(first_error.map_or(Ok(()), Err)),
                Packet::Data(d) => {
                    if first_error.is_none() {
                        if let Err(e) = each(d) {
                            first_error = Some(e);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::filter::pktline::{PktWriter, MAX_DATA};
    use proptest::prelude::*;

    /// Every packet of `input` (`None` for a flush), up to its clean end.
    pub(in crate::filter::pktline) fn packets(
        input: &[u8],
    ) -> Result<Vec<Option<Vec<u8>>>, GitError> {
        let mut r = PktReader::new(input);
        let mut out = Vec::new();
        while let Some(p) = r.read()? {
            out.push(match p {
                Packet::Flush => None,
                Packet::Data(d) => Some(d.to_vec()),
            });
        }
        Ok(out)
    }

    #[test]
    fn lists_strip_newlines_and_end_at_flush() {
        let mut r = PktReader::new(&b"000ccommand\n0009a=b=c0000"[..]);
        let list = r.read_list().unwrap().unwrap();
        assert_eq!(list, vec![b"command".to_vec(), b"a=b=c".to_vec()]);
        assert!(r.read_list().unwrap().is_none(), "clean end of input");
    }

    #[test]
    fn malformed_input_is_a_clear_error_not_a_panic() {
        let mut largest = b"fff0".to_vec();
        largest.resize(MAX_PACKET - 1, b'x');
        for (input, expect) in [
            (&b"00"[..], "inside a packet header"),
            (b"0008abcd000", "inside a packet header"),
            (b"zzzz", "invalid packet length"),
            (b"+0a0", "invalid packet length"),
            (b"00 8abcd", "invalid packet length"),
            (b"0001", "special packet 0001"),
            (b"0002", "special packet 0002"),
            (b"0003", "special packet 0003"),
            (b"0004", "empty data packet"),
            (b"fff1", "longer than the maximum"),
            (b"ffff", "longer than the maximum"),
            (b"0010abc", "inside a packet"),
            (b"0008abcd0009ab", "inside a packet"),
            // The largest packet, one byte short.
            (&largest, "inside a packet"),
        ] {
            let err = packets(input).unwrap_err();
            assert!(
                matches!(err, GitError::FilterProtocol(_)),
                "{input:?}: {err:?}"
            );
            assert!(err.to_string().contains(expect), "{input:?}: {err}");
        }
        let mut r = PktReader::new(&b"0008abcd"[..]);
        let err = r.read_list().unwrap_err().to_string();
        assert!(err.contains("middle of a request"), "{err}");
    }

    #[test]
    fn the_largest_packet_and_upper_case_lengths_are_read() {
        let mut input = b"fff0".to_vec();
        input.resize(MAX_PACKET, b'x');
        input.extend_from_slice(b"000A12345600000005z");
        let got = packets(&input).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].as_ref().map(Vec::len), Some(MAX_DATA));
        assert_eq!(got[1].as_deref(), Some(&b"123456"[..]));
        assert_eq!((&got[2], got[3].as_deref()), (&None, Some(&b"z"[..])));
    }

    /// A reader that fails once after `ok` bytes, then goes on.
    struct Hiccup<'a> {
        data: &'a [u8],
        pos: usize,
        fail_at: usize,
        failed: bool,
    }

    impl Read for Hiccup<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.pos == self.fail_at && !self.failed {
                self.failed = true;
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "pipe reset",
                ));
            }
            let end = if self.pos < self.fail_at {
                self.fail_at
            } else {
                self.data.len()
            };
            let n = buf.len().min(end - self.pos).min(1);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn read_errors_are_io_errors_and_byte_by_byte_input_is_whole() {
        let data = b"0009hello0000";
        let mut r = PktReader::new(Hiccup {
            data,
            pos: 0,
            fail_at: data.len(),
            failed: true,
        });
        assert_eq!(r.read().unwrap(), Some(Packet::Data(b"hello")));
        assert_eq!(r.read().unwrap(), Some(Packet::Flush));
        assert_eq!(r.read().unwrap(), None);
        let mut r = PktReader::new(Hiccup {
            data,
            pos: 0,
            fail_at: 6,
            failed: false,
        });
        let err = r.read().unwrap_err();
        assert!(matches!(err, GitError::Io { .. }), "{err:?}");
    }

    #[test]
    fn content_errors_wait_for_the_end_of_the_content() {
        let mut w = PktWriter::new(Vec::new());
        w.data(b"one").unwrap();
        w.data(b"two").unwrap();
        w.flush_packet().unwrap();
        w.line("next").unwrap();
        w.send().unwrap();
        let bytes = w.into_inner();
        let mut r = PktReader::new(&bytes[..]);
        let mut calls = 0;
        let result = r
            .read_content(|_| {
                calls += 1;
                Err(GitError::io("writing", std::io::Error::other("disk full")))
            })
            .unwrap();
        assert_eq!(calls, 1);
        assert!(result.unwrap_err().to_string().contains("disk full"));
        // The stream is positioned after the content.
        assert!(matches!(r.read().unwrap(), Some(Packet::Data(b"next\n"))));
    }

    /// A packet for the writer: data, or a flush (`None`).
    fn packet() -> impl Strategy<Value = Option<Vec<u8>>> {
        prop::option::of(prop::collection::vec(any::<u8>(), 1..200))
    }

    /// Bytes that are mostly hex digits, so that lengths parse.
    fn hexish() -> impl Strategy<Value = Vec<u8>> {
        let byte =
            prop_oneof![3 => prop::sample::select(b"0123456789abcdef".to_vec()), 1 => any::<u8>()];
        prop::collection::vec(byte, 0..64)
    }

    proptest! {
        /// Packets the writer framed read back as written; cut anywhere, the input reads
        /// back up to the cut and then ends cleanly (at a packet boundary) or fails as a
        /// protocol error, never a panic.
        #[test]
        fn framed_packets_read_back_and_cuts_fail_cleanly(
            written in prop::collection::vec(packet(), 0..20),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut w = PktWriter::new(Vec::new());
            let mut boundaries = vec![0];
            for p in &written {
                match p {
                    Some(d) => w.data(d).unwrap(),
                    None => w.flush_packet().unwrap(),
                }
                let len = p.as_ref().map_or(4, |d| d.len() + 4);
                boundaries.push(boundaries.last().unwrap() + len);
            }
            w.send().unwrap();
            let bytes = w.into_inner();
            prop_assert_eq!(packets(&bytes).unwrap(), written.clone());
            let at = cut.index(bytes.len() + 1);
            match packets(&bytes[..at]) {
                Ok(got) => {
                    prop_assert!(boundaries.contains(&at));
                    prop_assert_eq!(&got[..], &written[..got.len()]);
                }
                Err(e) => {
                    prop_assert!(!boundaries.contains(&at));
                    prop_assert!(matches!(e, GitError::FilterProtocol(_)), "{:?}", e);
                }
            }
        }

        /// Arbitrary bytes: lists, a clean end or a protocol error, never a panic.
        #[test]
        fn arbitrary_input_never_panics(input in hexish()) {
            let mut r = PktReader::new(&input[..]);
            for _ in 0..64 {
                match r.read_list() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        prop_assert!(matches!(e, GitError::FilterProtocol(_)), "{:?}", e);
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn too_many_list_lines_are_refused() {
        let mut w = PktWriter::new(Vec::new());
        for _ in 0..=MAX_LIST_LINES {
            w.line("k=v").unwrap();
        }
        w.flush_packet().unwrap();
        w.send().unwrap();
        let bytes = w.into_inner();
        let err = PktReader::new(&bytes[..]).read_list().unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
