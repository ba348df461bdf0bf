//! git-lfs's pure-ssh protocol on pkt-lines (gix-packetline): requests are a command line,
//! argument lines, and after a delimiter either text lines or binary data, up to a flush;
//! answers are a `status NNN` line, arguments, and after a delimiter text or data.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};

use gix_packetline::blocking_io::encode;
use gix_packetline::blocking_io::StreamingPeekableIter;
use gix_packetline::PacketLineRef;

use crate::ShellError;

/// Largest payload of one pkt-line.
pub const MAX_DATA: usize = 65516;
/// Most arguments one request may carry (git-lfs sends at most a handful).
const MAX_ARGS: usize = 64;
/// Longest text line of a body (an object line is `<64 hex> <size>` and a few `key=value`).
const MAX_BODY_LINE: usize = 1024;

/// One packet as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    Data(Vec<u8>),
    Flush,
    Delim,
}

/// A request: its command, its arguments, and whether a delimiter followed them (then
/// lines or data come next, up to a flush).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub command: String,
    pub args: Vec<String>,
    pub has_body: bool,
}

impl Request {
    /// The value of argument `key`, if given.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args
            .iter()
            .find_map(|a| a.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
    }
}

/// The reading side, shared with a [`DataReader`] that an HTTP upload pulls from.
struct Input<R> {
    lines: StreamingPeekableIter<R>,
    /// Set once the request owning a `DataReader` is over; the reader then sees the end.
    closed: bool,
}

pub struct PktIo<R, W> {
    input: Arc<Mutex<Input<R>>>,
    out: W,
}

fn protocol(why: impl Into<String>) -> ShellError {
    ShellError::Protocol(why.into())
}

fn read_packet<R: Read>(
    lines: &mut StreamingPeekableIter<R>,
) -> Result<Option<Packet>, ShellError> {
    match lines.read_line() {
        None => Ok(None),
        Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Some(Err(e)) => Err(ShellError::Io("reading from the client".into(), e)),
        Some(Ok(Err(e))) => Err(protocol(format!("bad pkt-line: {e}"))),
        Some(Ok(Ok(line))) => Ok(Some(match line {
            PacketLineRef::Data(d) => Packet::Data(d.to_vec()),
            PacketLineRef::Flush => Packet::Flush,
            PacketLineRef::Delimiter => Packet::Delim,
            PacketLineRef::ResponseEnd => return Err(protocol("unexpected response-end packet")),
        })),
    }
}

fn text(data: Vec<u8>) -> Result<String, ShellError> {
    let mut s = String::from_utf8(data).map_err(|_| protocol("a text line is not UTF-8"))?;
    if s.ends_with('\n') {
        s.pop();
    }
    Ok(s)
}

impl<R: Read + Send + 'static, W: Write> PktIo<R, W> {
    pub fn new(input: R, out: W) -> PktIo<R, W> {
        // No stop packets: flushes and delimiters are read as packets and handled here.
        let lines = StreamingPeekableIter::new(input, &[], false);
        PktIo {
            input: Arc::new(Mutex::new(Input {
                lines,
                closed: false,
            })),
            out,
        }
    }

    fn packet(&self) -> Result<Option<Packet>, ShellError> {
        let mut input = self.input.lock().expect("input lock");
        read_packet(&mut input.lines)
    }

    /// The next request, or `None` when the client has closed the connection.
    pub fn read_request(&mut self) -> Result<Option<Request>, ShellError> {
        let command = match self.packet()? {
            None => return Ok(None),
            Some(Packet::Data(d)) => text(d)?,
            Some(p) => return Err(protocol(format!("expected a command, got {p:?}"))),
        };
        let mut args = Vec::new();
        loop {
            match self.packet()? {
                Some(Packet::Data(_)) if args.len() == MAX_ARGS => {
                    return Err(protocol(format!("more than {MAX_ARGS} arguments")))
                }
                Some(Packet::Data(d)) => args.push(text(d)?),
                Some(Packet::Flush) => {
                    return Ok(Some(Request {
                        command,
                        args,
                        has_body: false,
                    }))
                }
                Some(Packet::Delim) => {
                    return Ok(Some(Request {
                        command,
                        args,
                        has_body: true,
                    }))
                }
                None => return Err(protocol("the client closed inside a request")),
            }
        }
    }

    /// The text lines of a body, up to its flush; at most `max` of them.
    pub fn read_lines(&mut self, max: usize) -> Result<Vec<String>, ShellError> {
        let mut lines = Vec::new();
        loop {
            match self.packet()? {
                Some(Packet::Data(d)) if d.len() > MAX_BODY_LINE => {
                    return Err(protocol(format!(
                        "a line longer than {MAX_BODY_LINE} bytes"
                    )))
                }
                Some(Packet::Data(d)) if lines.len() < max => lines.push(text(d)?),
                Some(Packet::Data(_)) => {
                    return Err(protocol(format!("more than {max} lines in one request")))
                }
                Some(Packet::Flush) => return Ok(lines),
                Some(Packet::Delim) => return Err(protocol("unexpected delimiter")),
                None => return Err(protocol("the client closed inside a request")),
            }
        }
    }

    /// Skips the rest of a body up to its flush; returns how many data bytes it held.
    pub fn drain(&mut self) -> Result<u64, ShellError> {
        let mut input = self.input.lock().expect("input lock");
        let mut skipped = 0u64;
        loop {
            match read_packet(&mut input.lines)? {
                Some(Packet::Data(d)) => skipped += d.len() as u64,
                Some(Packet::Flush) => return Ok(skipped),
                Some(Packet::Delim) => return Err(protocol("unexpected delimiter")),
                None => return Err(protocol("the client closed inside a request")),
            }
        }
    }

    /// A reader of the body's data, at most `limit` bytes of it (the rest stays for
    /// [`drain`](Self::drain)). Call [`end_data`](Self::end_data) when done with it.
    pub fn data_reader(&self, limit: u64) -> DataReader<R> {
        self.input.lock().expect("input lock").closed = false;
        DataReader {
            input: self.input.clone(),
            pending: Vec::new(),
            pos: 0,
            left: limit,
            state: Arc::new(DataState::default()),
        }
    }

    /// Ends a [`DataReader`]'s turn: whatever still holds it reads nothing more. Then the
    /// rest of the body (if its flush was not reached) is drained; returns the bytes left.
    pub fn end_data(&mut self, reader_reached_flush: bool) -> Result<u64, ShellError> {
        self.input.lock().expect("input lock").closed = true;
        match reader_reached_flush {
            true => Ok(0),
            false => self.drain(),
        }
    }

    fn write_text(&mut self, line: &str) -> Result<(), ShellError> {
        encode::text_to_write(line.as_bytes(), &mut self.out).map_err(write_err)?;
        Ok(())
    }

    fn head(&mut self, status: u16, args: &[String]) -> Result<(), ShellError> {
        self.write_text(&format!("status {status}"))?;
        for arg in args {
            self.write_text(arg)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ShellError> {
        encode::flush_to_write(&mut self.out).map_err(write_err)?;
        self.out.flush().map_err(write_err)
    }

    /// Lines sent before the client's first request.
    pub fn advertise(&mut self, capabilities: &[&str]) -> Result<(), ShellError> {
        for c in capabilities {
            self.write_text(c)?;
        }
        self.flush()
    }

    /// `status NNN`, arguments, and (when `lines` is given) a delimiter and the lines.
    pub fn status(
        &mut self,
        status: u16,
        args: &[String],
        lines: Option<&[String]>,
    ) -> Result<(), ShellError> {
        self.head(status, args)?;
        if let Some(lines) = lines {
            encode::delim_to_write(&mut self.out).map_err(write_err)?;
            for line in lines {
                self.write_text(line)?;
            }
        }
        self.flush()
    }

    /// An error answer: its status and a message the user sees.
    pub fn error(&mut self, status: u16, message: &str) -> Result<(), ShellError> {
        let message: String = message.chars().filter(|c| !c.is_control()).collect();
        self.status(status, &[], Some(&[message]))
    }

    /// `status 200`, arguments, a delimiter and `data` as binary packets. A failure while
    /// reading `data` cannot be reported any more (the status is sent): it ends the session.
    pub fn data(&mut self, args: &[String], data: &mut dyn Read) -> Result<u64, ShellError> {
        self.head(200, args)?;
        encode::delim_to_write(&mut self.out).map_err(write_err)?;
        let mut buf = vec![0u8; MAX_DATA];
        let mut sent = 0u64;
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(ShellError::Io(
                        "reading the object from the server".into(),
                        e,
                    ))
                }
            };
            encode::data_to_write(&buf[..n], &mut self.out).map_err(write_err)?;
            sent += n as u64;
        }
        self.flush()?;
        Ok(sent)
    }
}

fn write_err(e: std::io::Error) -> ShellError {
    ShellError::Io("writing to the client".into(), e)
}

/// The data of a request body as a `Read`, packet by packet, up to its flush or its limit.
pub struct DataReader<R> {
    input: Arc<Mutex<Input<R>>>,
    pending: Vec<u8>,
    pos: usize,
    left: u64,
    state: Arc<DataState>,
}

/// What a [`DataReader`] saw, readable after it was handed away.
#[derive(Debug, Default)]
pub struct DataState {
    /// The body's flush was read: nothing is left to drain.
    pub at_flush: std::sync::atomic::AtomicBool,
    /// The body held more than the limit.
    pub overflow: std::sync::atomic::AtomicBool,
}

impl<R> DataReader<R> {
    pub fn state(&self) -> Arc<DataState> {
        self.state.clone()
    }
}

impl<R: Read> Read for DataReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::sync::atomic::Ordering;
        while self.pos == self.pending.len() {
            if self.left == 0 || self.state.at_flush.load(Ordering::SeqCst) {
                return Ok(0);
            }
            let mut input = self.input.lock().expect("input lock");
            if input.closed {
                return Ok(0);
            }
            match read_packet(&mut input.lines) {
                Ok(Some(Packet::Data(d))) => {
                    self.pending = d;
                    self.pos = 0;
                }
                Ok(Some(Packet::Flush)) => {
                    self.state.at_flush.store(true, Ordering::SeqCst);
                    return Ok(0);
                }
                Ok(Some(Packet::Delim)) | Ok(None) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the object's data ended early",
                    ))
                }
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
        }
        let n = buf
            .len()
            .min(self.pending.len() - self.pos)
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        self.left -= n as u64;
        if self.left == 0 && self.pos < self.pending.len() {
            self.state.overflow.store(true, Ordering::SeqCst);
        }
        Ok(n)
    }
}
