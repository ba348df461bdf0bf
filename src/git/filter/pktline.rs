//! git's pkt-line framing (gitprotocol-common(5)), as used by the long-running filter
//! protocol: a 4-digit hex length that counts itself, then the payload; `0000` is a flush.
//!
//! The reader never allocates from a length it read: payloads go into one fixed buffer of
//! the largest size git may send, and anything longer is a protocol error.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::{FileExt, FileTypeExt};

use crate::git::GitError;
use crate::io::platform::pipe;

/// The largest packet, header included.
pub const MAX_PACKET: usize = 65520;
/// The largest payload of one packet.
pub const MAX_DATA: usize = MAX_PACKET - 4;
/// Text lists (headers, capabilities) longer than this are refused: git sends a handful.
const MAX_LIST_LINES: usize = 1024;

/// One packet as read.
#[derive(Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    Flush,
    Data(&'a [u8]),
}

pub struct PktReader<R> {
    inner: R,
    buf: Box<[u8; MAX_DATA]>,
}

fn protocol(msg: impl Into<String>) -> GitError {
    GitError::FilterProtocol(msg.into())
}

impl<R: Read> PktReader<R> {
    pub fn new(inner: R) -> PktReader<R> {
        PktReader {
            inner,
            buf: Box::new([0; MAX_DATA]),
        }
    }

    /// The next packet; `None` when the input ends cleanly between packets.
    pub fn read(&mut self) -> Result<Option<Packet<'_>>, GitError> {
        let mut header = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match self.inner.read(&mut header[got..]) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(protocol("input ended inside a packet header")),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(GitError::io("reading from git", e)),
            }
        }
        let len = std::str::from_utf8(&header)
            .ok()
            .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or_else(|| {
                protocol(format!(
                    "invalid packet length {:?}",
                    header.escape_ascii().to_string()
                ))
            })?;
        match len {
            0 => Ok(Some(Packet::Flush)),
            1..=3 => Err(protocol(format!(
                "unexpected special packet {len:04x} (the filter protocol only uses flush)"
            ))),
            4 => Err(protocol("empty data packet")),
            n if n > MAX_PACKET => Err(protocol(format!(
                "packet of {n} bytes is longer than the maximum {MAX_PACKET}"
            ))),
            n => {
                let data = &mut self.buf[..n - 4];
                self.inner.read_exact(data).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        protocol("input ended inside a packet")
                    } else {
                        GitError::io("reading from git", e)
                    }
                })?;
                Ok(Some(Packet::Data(data)))
            }
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

/// Packets collect in a buffer of this size before they are written to git.
const WRITE_BUFFER: usize = 1 << 20;
/// Content copied from a file is framed this many packets at a time (2 MiB).
const FRAME_PACKETS: usize = 32;

/// Writes packets, buffered: nothing reaches git before [`PktWriter::send`] or a full
/// buffer.
pub struct PktWriter<W> {
    inner: W,
    buf: Vec<u8>,
    /// The pipe `inner` writes to, when files may be spliced into it.
    splice_to: Option<RawFd>,
}

impl<W: Write> PktWriter<W> {
    /// `inner` should be unbuffered: the writer buffers itself, and large content bypasses
    /// the buffer.
    pub fn new(inner: W) -> PktWriter<W> {
        PktWriter {
            inner,
            buf: Vec::with_capacity(WRITE_BUFFER),
            splice_to: None,
        }
    }

    /// Lets [`PktWriter::copy_file`] move file pages into `pipe` with splice(2) instead of
    /// copying them through this process. `pipe` must be the descriptor `inner` writes to;
    /// anything but a pipe is ignored.
    pub fn splicing_into(mut self, pipe: BorrowedFd<'_>) -> PktWriter<W> {
        let is_pipe = std::fs::File::from(match pipe.try_clone_to_owned() {
            Ok(fd) => fd,
            Err(_) => return self,
        })
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo());
        if is_pipe {
            self.splice_to = Some(pipe.as_raw_fd());
        }
        self
    }

    /// Writes `data` as as many packets as it needs.
    pub fn data(&mut self, data: &[u8]) -> Result<(), GitError> {
        for piece in data.chunks(MAX_DATA) {
            if self.buf.len() + 4 + piece.len() > WRITE_BUFFER {
                self.write_buffer()?;
            }
            self.buf
                .extend_from_slice(format!("{:04x}", piece.len() + 4).as_bytes());
            self.buf.extend_from_slice(piece);
        }
        Ok(())
    }

    /// One text line (a newline is added).
    pub fn line(&mut self, text: &str) -> Result<(), GitError> {
        let mut packet = Vec::with_capacity(text.len() + 1);
        packet.extend_from_slice(text.as_bytes());
        packet.push(b'\n');
        if packet.len() > MAX_DATA {
            return Err(protocol("a text line is too long for one packet"));
        }
        self.data(&packet)
    }

    pub fn flush_packet(&mut self) -> Result<(), GitError> {
        if self.buf.len() + 4 > WRITE_BUFFER {
            self.write_buffer()?;
        }
        self.buf.extend_from_slice(b"0000");
        Ok(())
    }

    /// Hands everything written so far to git.
    pub fn send(&mut self) -> Result<(), GitError> {
        self.write_buffer()?;
        self.inner
            .flush()
            .map_err(|e| GitError::io("writing to git", e))
    }

    fn write_buffer(&mut self) -> Result<(), GitError> {
        let result = self.inner.write_all(&self.buf);
        self.buf.clear();
        result.map_err(|e| GitError::io("writing to git", e))
    }

    /// Writes everything `source` yields as content packets. The outer error means git's
    /// pipe broke; the inner one that `source` failed (after part of it was sent).
    ///
    /// Content is read straight into packet frames, headers in place, and each frame goes
    /// to git in one write: a large file is copied once on this side, not twice.
    pub fn copy_from(&mut self, source: &mut dyn Read) -> Result<Result<u64, GitError>, GitError> {
        self.write_buffer()?;
        let mut frame = vec![0u8; MAX_PACKET * FRAME_PACKETS];
        let mut total = 0u64;
        loop {
            let mut used = 0;
            let mut ended = false;
            while used < frame.len() && !ended {
                let slot = &mut frame[used..used + MAX_PACKET];
                let mut got = 0;
                while got < MAX_DATA {
                    match source.read(&mut slot[4 + got..]) {
                        Ok(0) => {
                            ended = true;
                            break;
                        }
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            self.write_frame(&frame[..used])?;
                            return Ok(Err(GitError::io("reading the content to send", e)));
                        }
                    }
                }
                if got > 0 {
                    slot[..4].copy_from_slice(format!("{:04x}", got + 4).as_bytes());
                    used += 4 + got;
                    total += got as u64;
                }
            }
            self.write_frame(&frame[..used])?;
            if ended {
                return Ok(Ok(total));
            }
        }
    }

    /// Writes a file's content as content packets; like [`PktWriter::copy_from`], but with
    /// splice(2) when the output is a pipe, so the pages go from the page cache into git's
    /// pipe without a copy here.
    pub fn copy_file(&mut self, file: &mut File) -> Result<Result<u64, GitError>, GitError> {
        let Some(pipe) = self.splice_to else {
            return self.copy_from(file);
        };
        self.write_buffer()?;
        let size = match file.metadata() {
            Ok(m) => m.len(),
            Err(e) => return Ok(Err(GitError::io("reading the content to send", e))),
        };
        // SAFETY: `pipe` is the descriptor `inner` writes to (see `splicing_into`), open for
        // as long as this writer.
        let pipe = unsafe { BorrowedFd::borrow_raw(pipe) };
        let mut offset = 0u64;
        while offset < size {
            let len = (size - offset).min(MAX_DATA as u64) as usize;
            self.write_frame(format!("{:04x}", len + 4).as_bytes())?;
            let mut done = 0;
            while done < len {
                let failure = match pipe::splice_from_file(file, &mut offset, pipe, len - done) {
                    Ok(0) => std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file shrank while it was sent",
                    ),
                    Ok(n) => {
                        done += n;
                        continue;
                    }
                    // The file system (or this system) cannot splice: read the rest.
                    Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                        self.splice_to = None;
                        return self.copy_rest(file, offset, len - done);
                    }
                    Err(e) => e,
                };
                // The header promised `len` bytes: keep the stream whole, then fail the file.
                self.write_frame(&vec![0u8; len - done])?;
                return Ok(Err(GitError::io("sending the content", failure)));
            }
        }
        Ok(Ok(size))
    }

    /// Finishes a packet that still needs `owed` bytes, and then the file from `offset`,
    /// by reading it.
    fn copy_rest(
        &mut self,
        file: &mut File,
        offset: u64,
        owed: usize,
    ) -> Result<Result<u64, GitError>, GitError> {
        let mut rest = vec![0u8; owed];
        let read = file
            .read_exact_at(&mut rest, offset)
            .and_then(|_| file.seek(SeekFrom::Start(offset + owed as u64)));
        if let Err(e) = read {
            self.write_frame(&vec![0u8; owed])?;
            return Ok(Err(GitError::io("reading the content to send", e)));
        }
        self.write_frame(&rest)?;
        let sent = offset + owed as u64;
        Ok(self.copy_from(file)?.map(|more| sent + more))
    }

    fn write_frame(&mut self, frame: &[u8]) -> Result<(), GitError> {
        self.inner
            .write_all(frame)
            .map_err(|e| GitError::io("writing to git", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packets(input: &[u8]) -> Result<Vec<Option<Vec<u8>>>, GitError> {
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
    fn writer_output_reads_back() {
        let mut w = PktWriter::new(Vec::new());
        w.line("version=2").unwrap();
        w.flush_packet().unwrap();
        let big = vec![7u8; MAX_DATA * 2 + 5];
        w.data(&big).unwrap();
        w.flush_packet().unwrap();
        w.send().unwrap();
        let bytes = w.inner;
        assert_eq!(&bytes[..14], b"000eversion=2\n");
        let got = packets(&bytes).unwrap();
        assert_eq!(got.len(), 6);
        assert_eq!(got[0].as_deref(), Some(&b"version=2\n"[..]));
        assert_eq!(got[1], None);
        assert_eq!(got[2].as_ref().unwrap().len(), MAX_DATA);
        assert_eq!(got[4].as_ref().unwrap().len(), 5);
        assert_eq!(got[5], None);
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
        for (input, expect) in [
            (&b"00"[..], "inside a packet header"),
            (b"zzzz", "invalid packet length"),
            (b"0001", "special packet"),
            (b"0004", "empty data packet"),
            (b"fff1", "longer than the maximum"),
            (b"0010abc", "inside a packet"),
            (b"+0a0", "invalid packet length"),
        ] {
            let err = packets(input).unwrap_err().to_string();
            assert!(err.contains(expect), "{input:?}: {err}");
        }
        let mut r = PktReader::new(&b"0008abcd"[..]);
        let err = r.read_list().unwrap_err().to_string();
        assert!(err.contains("middle of a request"), "{err}");
    }

    #[test]
    fn content_errors_wait_for_the_end_of_the_content() {
        let mut w = PktWriter::new(Vec::new());
        w.data(b"one").unwrap();
        w.data(b"two").unwrap();
        w.flush_packet().unwrap();
        w.line("next").unwrap();
        w.send().unwrap();
        let bytes = w.inner;
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

    /// A source that yields at most `step` bytes per read and can fail after `fail_at`.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
        fail_at: Option<usize>,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.fail_at.is_some_and(|f| self.pos >= f) {
                return Err(std::io::Error::other("disk gone"));
            }
            let n = buf.len().min(self.step).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn copied_content_reads_back_in_full_packets() {
        let frame = MAX_DATA * FRAME_PACKETS;
        for (len, step) in [
            (0, 1 << 20),
            (1, 1 << 20),
            (MAX_DATA, 1000),
            (MAX_DATA + 1, 1 << 20),
            (frame, 7777),
            (frame * 2 + 3, 1 << 20),
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut w = PktWriter::new(Vec::new());
            w.line("status=success").unwrap();
            w.flush_packet().unwrap();
            let mut source = Trickle {
                data: data.clone(),
                pos: 0,
                step,
                fail_at: None,
            };
            assert_eq!(w.copy_from(&mut source).unwrap().unwrap(), len as u64);
            w.flush_packet().unwrap();
            w.send().unwrap();
            let got = packets(&w.inner).unwrap();
            assert_eq!(got[0].as_deref(), Some(&b"status=success\n"[..]));
            let content: Vec<Vec<u8>> = got[2..got.len() - 1].iter().flatten().cloned().collect();
            assert_eq!(
                content.len(),
                len.div_ceil(MAX_DATA),
                "len {len}: one packet per MAX_DATA"
            );
            assert_eq!(content.concat(), data, "len {len} step {step}");
            assert_eq!(got.last(), Some(&None));
        }
    }

    #[test]
    fn files_spliced_into_a_pipe_read_back() {
        let len = MAX_DATA * 40 + 123;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        let (reader, writer) = std::io::pipe().unwrap();
        // Git's side: everything up to the end of the pipe.
        let git = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut reader = reader;
            reader.read_to_end(&mut all).unwrap();
            all
        });
        let fd = writer.try_clone().unwrap();
        let mut w = PktWriter::new(writer).splicing_into(std::os::fd::AsFd::as_fd(&fd));
        assert!(w.splice_to.is_some(), "a pipe is spliced into");
        w.line("status=success").unwrap();
        w.flush_packet().unwrap();
        assert_eq!(w.copy_file(&mut file).unwrap().unwrap(), len as u64);
        w.flush_packet().unwrap();
        w.send().unwrap();
        drop((w, fd));
        let got = packets(&git.join().unwrap()).unwrap();
        assert_eq!(got[0].as_deref(), Some(&b"status=success\n"[..]));
        let content: Vec<u8> = got[2..got.len() - 1]
            .iter()
            .flatten()
            .flatten()
            .copied()
            .collect();
        assert_eq!(got.len() - 3, len.div_ceil(MAX_DATA), "full packets");
        assert!(content == data);
        // Not a pipe: copied instead.
        let w = PktWriter::new(Vec::new()).splicing_into(std::os::fd::AsFd::as_fd(&file));
        assert!(w.splice_to.is_none());
    }

    #[test]
    fn a_failing_source_is_reported_after_what_was_sent() {
        let data = vec![9u8; MAX_DATA * 3];
        let mut w = PktWriter::new(Vec::new());
        let mut source = Trickle {
            data,
            pos: 0,
            step: MAX_DATA,
            fail_at: Some(MAX_DATA * 2),
        };
        let err = w.copy_from(&mut source).unwrap().unwrap_err();
        assert!(err.to_string().contains("disk gone"), "{err}");
        w.send().unwrap();
        let got = packets(&w.inner).unwrap();
        assert_eq!(
            got.iter().flatten().map(Vec::len).sum::<usize>(),
            MAX_DATA * 2
        );
    }

    #[test]
    fn too_many_list_lines_are_refused() {
        let mut w = PktWriter::new(Vec::new());
        for _ in 0..=MAX_LIST_LINES {
            w.line("k=v").unwrap();
        }
        w.flush_packet().unwrap();
        w.send().unwrap();
        let bytes = w.inner;
        let err = PktReader::new(&bytes[..]).read_list().unwrap_err();
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
