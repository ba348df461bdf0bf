//! Writing packets to git: gix-packetline encodes every header and flush; the payload of
//! large content goes its own way (read into frames in place, or spliced from the file).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::{FileExt, FileTypeExt};

use gix_packetline::blocking_io::encode;

use super::{header, protocol, MAX_DATA, MAX_PACKET, ZEROS};
use crate::GitError;
use git_xet_io::platform::pipe;

/// Packets collect in a buffer of this size before they are written to git.
const WRITE_BUFFER: usize = 1 << 20;
/// Content copied from a file is framed this many packets at a time (2 MiB).
const FRAME_PACKETS: usize = 32;

fn to_git(e: std::io::Error) -> GitError {
    GitError::io("writing to git", e)
}

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

    /// Room for `bytes` more in the buffer, writing it out first if need be.
    fn reserve(&mut self, bytes: usize) -> Result<(), GitError> {
        if self.buf.len() + bytes > WRITE_BUFFER {
            self.write_buffer()?;
        }
        Ok(())
    }

    /// Writes `data` as as many packets as it needs.
    pub fn data(&mut self, data: &[u8]) -> Result<(), GitError> {
        for piece in data.chunks(MAX_DATA) {
            self.reserve(4 + piece.len())?;
            encode::data_to_write(piece, &mut self.buf).map_err(to_git)?;
        }
        Ok(())
    }

    /// One text line (a newline is added).
    pub fn line(&mut self, text: &str) -> Result<(), GitError> {
        if text.len() + 1 > MAX_DATA {
            return Err(protocol("a text line is too long for one packet"));
        }
        if text.is_empty() {
            // gix-packetline refuses an empty text; git reads it as a bare newline.
            return self.data(b"\n");
        }
        self.reserve(4 + text.len() + 1)?;
        encode::text_to_write(text.as_bytes(), &mut self.buf)
            .map_err(|e| protocol(format!("cannot send the line {text:?}: {e}")))?;
        Ok(())
    }

    pub fn flush_packet(&mut self) -> Result<(), GitError> {
        self.reserve(4)?;
        encode::flush_to_write(&mut self.buf).map_err(to_git)?;
        Ok(())
    }

    /// Hands everything written so far to git.
    pub fn send(&mut self) -> Result<(), GitError> {
        self.write_buffer()?;
        self.inner.flush().map_err(to_git)
    }

    fn write_buffer(&mut self) -> Result<(), GitError> {
        let result = self.inner.write_all(&self.buf);
        self.buf.clear();
        result.map_err(to_git)
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
                    let head = header(&slot[4..4 + got])?;
                    slot[..4].copy_from_slice(&head);
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
            // The header goes through `inner`, the payload around it, straight into the pipe.
            self.write_frame(&header(&ZEROS[..len])?)?;
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
                self.write_frame(&ZEROS[..len - done])?;
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
            self.write_frame(&ZEROS[..owed])?;
            return Ok(Err(GitError::io("reading the content to send", e)));
        }
        self.write_frame(&rest)?;
        let sent = offset + owed as u64;
        Ok(self.copy_from(file)?.map(|more| sent + more))
    }

    fn write_frame(&mut self, frame: &[u8]) -> Result<(), GitError> {
        self.inner.write_all(frame).map_err(to_git)
    }

    #[cfg(test)]
    pub(super) fn into_inner(self) -> W {
        self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::pktline::read::tests::packets;

    #[test]
    fn writer_output_reads_back() {
        let mut w = PktWriter::new(Vec::new());
        w.line("version=2").unwrap();
        w.line("").unwrap();
        w.flush_packet().unwrap();
        let big = vec![7u8; MAX_DATA * 2 + 5];
        w.data(&big).unwrap();
        w.flush_packet().unwrap();
        w.send().unwrap();
        let bytes = w.inner;
        assert_eq!(&bytes[..19], b"000eversion=2\n0005\n");
        let got = packets(&bytes).unwrap();
        assert_eq!(got.len(), 7);
        assert_eq!(got[0].as_deref(), Some(&b"version=2\n"[..]));
        assert_eq!(got[1].as_deref(), Some(&b"\n"[..]));
        assert_eq!(got[2], None);
        assert_eq!(got[3].as_ref().unwrap().len(), MAX_DATA);
        assert_eq!(got[5].as_ref().unwrap().len(), 5);
        assert_eq!(got[6], None);
    }

    #[test]
    fn a_line_too_long_for_a_packet_is_refused_and_nothing_is_written() {
        let mut w = PktWriter::new(Vec::new());
        let longest = "x".repeat(MAX_DATA - 1);
        w.line(&longest).unwrap();
        let err = w.line(&format!("{longest}y")).unwrap_err();
        assert!(matches!(err, GitError::FilterProtocol(_)), "{err:?}");
        w.send().unwrap();
        let got = packets(&w.inner).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().map(Vec::len), Some(MAX_DATA));
    }

    #[test]
    fn packets_fill_the_buffer_without_overrunning_it() {
        // Enough small packets to pass WRITE_BUFFER several times: each write stays whole.
        let mut w = PktWriter::new(Vec::new());
        let piece = vec![3u8; 1000];
        let count = WRITE_BUFFER * 3 / 1004 + 7;
        for _ in 0..count {
            w.data(&piece).unwrap();
            assert!(w.buf.len() <= WRITE_BUFFER);
        }
        w.flush_packet().unwrap();
        w.send().unwrap();
        let got = packets(&w.inner).unwrap();
        assert_eq!(got.len(), count + 1);
        assert!(got[..count]
            .iter()
            .all(|p| p.as_deref() == Some(&piece[..])));
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

    /// Sends `file` through a writer into a pipe; returns what git's side read.
    fn through_pipe(file: &mut File) -> (Result<u64, GitError>, Vec<u8>) {
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
        let sent = w.copy_file(file).unwrap();
        w.flush_packet().unwrap();
        w.send().unwrap();
        drop((w, fd));
        (sent, git.join().unwrap())
    }

    #[test]
    fn files_spliced_into_a_pipe_read_back() {
        for len in [1, MAX_DATA, MAX_DATA * 40 + 123] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(&data).unwrap();
            let (sent, bytes) = through_pipe(&mut file);
            assert_eq!(sent.unwrap(), len as u64);
            let got = packets(&bytes).unwrap();
            assert_eq!(got[0].as_deref(), Some(&b"status=success\n"[..]));
            let content: Vec<u8> = got[2..got.len() - 1]
                .iter()
                .flatten()
                .flatten()
                .copied()
                .collect();
            assert_eq!(got.len() - 3, len.div_ceil(MAX_DATA), "full packets");
            assert!(content == data, "len {len}");
        }
        // Not a pipe: copied instead.
        let file = tempfile::tempfile().unwrap();
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
}
