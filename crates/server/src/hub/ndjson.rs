//! The lines of a Hub commit request, read as they arrive: one JSON object per line
//! (`{"key": "header" | "file" | "lfsFile" | "deletedFile" | "deletedFolder", "value": ...}`),
//! each at most [`MAX_LINE`] bytes, so that a request of any size is read in the memory of
//! one line. A `file` line carries its content base64-encoded; regular files are small on the
//! Hub (from 10 MiB they go through LFS/XET: upload.rs answers `lfs` for them), and a longer
//! line is refused saying so.

use std::borrow::Cow;
use std::io::{BufRead, ErrorKind};

use serde::Deserialize;

use crate::error::ServerError;
use crate::hub::HubError;

/// The longest line: a `file` line of a regular file of up to 12 MiB (base64 grows it by a
/// third), past the 10 MiB from which files go through LFS/XET.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// One line, its strings borrowed from the line where JSON did not escape them.
#[derive(Deserialize, Debug)]
#[serde(tag = "key", content = "value", rename_all = "camelCase")]
pub enum Line<'a> {
    Header(Header),
    File(#[serde(borrow)] FileOp<'a>),
    LfsFile(#[serde(borrow)] LfsOp<'a>),
    DeletedFile(#[serde(borrow)] PathOp<'a>),
    DeletedFolder(#[serde(borrow)] PathOp<'a>),
}

#[derive(Deserialize, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub summary: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parent_commit: Option<String>,
}

#[derive(Deserialize, Debug)]
pub struct FileOp<'a> {
    #[serde(borrow)]
    pub path: Cow<'a, str>,
    #[serde(borrow)]
    pub content: Cow<'a, str>,
    #[serde(default, borrow)]
    pub encoding: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Debug)]
pub struct LfsOp<'a> {
    #[serde(borrow)]
    pub path: Cow<'a, str>,
    #[serde(borrow)]
    pub oid: Cow<'a, str>,
    #[serde(default)]
    pub size: Option<u64>,
}

#[derive(Deserialize, Debug)]
pub struct PathOp<'a> {
    #[serde(borrow)]
    pub path: Cow<'a, str>,
}

fn bad(msg: String) -> HubError {
    ServerError::bad_request(msg).into()
}

/// Reads the request's lines one at a time into one buffer (blank lines skipped).
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    number: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R) -> Lines<R> {
        Lines {
            reader,
            buf: Vec::new(),
            number: 0,
        }
    }

    /// The number of the line last read (from 1), as messages give it.
    #[cfg(test)]
    pub fn number(&self) -> usize {
        self.number
    }

    /// The next non-blank line, parsed; `None` at the end of the body.
    pub fn next_line(&mut self) -> Result<Option<Line<'_>>, HubError> {
        loop {
            if !self.read_raw()? {
                return Ok(None);
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                break;
            }
        }
        let number = self.number;
        serde_json::from_slice(&self.buf).map(Some).map_err(|e| {
            bad(format!(
                "line {number} of the commit request is malformed: {e}"
            ))
        })
    }

    /// Reads the next line into `buf` (without its newline); `false` at the end.
    fn read_raw(&mut self) -> Result<bool, HubError> {
        self.buf.clear();
        self.number += 1;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_error(e)),
            };
            if available.is_empty() {
                return Ok(!self.buf.is_empty());
            }
            let (take, ended) = match newline_at(available) {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            if self.buf.len() + take > MAX_LINE {
                return Err(too_long(self.number));
            }
            self.buf.extend_from_slice(&available[..take]);
            self.reader.consume(take + usize::from(ended));
            if ended {
                return Ok(true);
            }
        }
    }
}

fn newline_at(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// A body that could not be read (cut short, over its limit, the connection gone). The
/// request answers with the body reader's own error (body.rs), not this one.
fn read_error(e: std::io::Error) -> HubError {
    bad(format!("reading the commit request: {e}"))
}

fn too_long(number: usize) -> HubError {
    ServerError::PayloadTooLarge(format!(
        "line {number} of the commit request is longer than {} MiB: a file that large is \
         uploaded through LFS/XET (huggingface_hub does so for files from 10 MiB, or for \
         any file an LFS rule of .gitattributes covers), and the commit names it in an \
         `lfsFile` line",
        MAX_LINE >> 20
    ))
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Lines<&[u8]> {
        Lines::new(input)
    }

    #[test]
    fn lines_parse_with_blank_lines_and_no_final_newline() {
        let input = b"{\"key\":\"header\",\"value\":{\"summary\":\"s\"}}\r\n\n  \n\
{\"value\":{\"path\":\"a\\u00e9\",\"content\":\"aGk=\"},\"key\":\"file\"}";
        let mut l = lines(input);
        assert!(matches!(l.next_line().unwrap(), Some(Line::Header(h)) if h.summary == "s"));
        match l.next_line().unwrap() {
            Some(Line::File(f)) => {
                assert_eq!((f.path.as_ref(), f.content.as_ref()), ("a\u{e9}", "aGk="));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(l.number(), 4);
        assert!(l.next_line().unwrap().is_none());
    }

    #[test]
    fn unknown_keys_bad_json_and_long_lines_are_refused() {
        let mut l = lines(b"{\"key\":\"copyFile\",\"value\":{}}\n");
        let e = l.next_line().unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("copyFile"), "{e}");
        let mut l = lines(b"\n{\"key\":\"file\"\n");
        assert!(l.next_line().unwrap_err().to_string().contains("line 2"));
        let mut long = vec![b'x'; MAX_LINE + 1];
        long.push(b'\n');
        let mut l = lines(&long);
        match l.next_line() {
            Err(HubError::Server(ServerError::PayloadTooLarge(m))) => {
                assert!(m.contains("LFS/XET"), "{m}")
            }
            other => panic!("{other:?}"),
        }
    }
}
