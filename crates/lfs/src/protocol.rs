//! Messages of git-lfs's custom transfer protocol (docs/custom-transfers.md in git-lfs):
//! one JSON object per line on stdin (requests) and stdout (answers).
//!
//! Requests are parsed strictly into typed values; every error names the offending field so
//! that a broken peer is diagnosed from one log line. Unknown fields are ignored, because
//! git-lfs adds fields over time (e.g. `remote` in `init`).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::pointer::Oid;
use crate::LfsError;

/// Error code for a failed `init` (the protocol document's value).
pub const INIT_ERROR_CODE: u32 = 32;
/// Error code for a failed object transfer.
pub const TRANSFER_ERROR_CODE: u32 = 2;
/// Longest request line accepted. Real requests are a few KiB (the action's headers).
pub const MAX_LINE_LEN: usize = 1 << 20;

/// Direction of a transfer session, from `init` (the Batch API's operation).
pub use git_xet_core::lfs::batch::Operation;

/// `{"event":"init",...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitRequest {
    pub operation: Operation,
    /// The remote name (or URL) git-lfs is talking to; empty when git-lfs did not say.
    pub remote: String,
    pub concurrent: bool,
    pub concurrent_transfers: u32,
}

/// The batch API action git-lfs copies into each request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Action {
    pub href: String,
    pub header: BTreeMap<String, String>,
}

impl Action {
    /// A header's value, compared case-insensitively as HTTP does.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `{"event":"upload"|"download","oid":...,"size":...,"path":...,"action":...}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransferRequest {
    pub operation: Operation,
    pub oid: Oid,
    pub size: u64,
    /// Upload: the file to read. Download: git-lfs sends none.
    pub path: Option<PathBuf>,
    /// `None` in git-lfs's standalone mode (no batch API).
    pub action: Option<Action>,
}

/// One request from git-lfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Init(InitRequest),
    Transfer(TransferRequest),
    Terminate,
}

/// A request that could not be parsed. `oid` is the object it named, when it named a valid
/// one, so that the answer can be a `complete` for that object.
#[derive(Debug)]
pub struct BadRequest {
    pub event: Option<String>,
    pub oid: Option<String>,
    pub error: Box<LfsError>,
}

impl Request {
    /// Parses one line (without its newline).
    pub fn parse(line: &str) -> Result<Request, BadRequest> {
        let value: Value = serde_json::from_str(line).map_err(|e| BadRequest {
            event: None,
            oid: None,
            error: protocol(format!("request is not valid JSON ({e})")),
        })?;
        let Value::Object(obj) = value else {
            return Err(BadRequest {
                event: None,
                oid: None,
                error: protocol("request is not a JSON object".into()),
            });
        };
        let event = match obj.get("event") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(bad_at(&obj, None, "field `event` must be a string")),
            None => return Err(bad_at(&obj, None, "request has no `event` field")),
        };
        let fail = |msg: String| bad_at(&obj, Some(&event), &msg);
        match event.as_str() {
            "init" => parse_init(&obj).map(Request::Init).map_err(fail),
            "upload" => parse_transfer(&obj, Operation::Upload)
                .map(Request::Transfer)
                .map_err(fail),
            "download" => parse_transfer(&obj, Operation::Download)
                .map(Request::Transfer)
                .map_err(fail),
            "terminate" => Ok(Request::Terminate),
            other => Err(fail(format!("unknown event {:?}", clip(other)))),
        }
    }
}

fn protocol(msg: String) -> Box<LfsError> {
    Box::new(LfsError::Protocol(msg))
}

fn bad_at(obj: &Map<String, Value>, event: Option<&str>, msg: &str) -> BadRequest {
    BadRequest {
        event: event.map(str::to_string),
        oid: obj.get("oid").and_then(Value::as_str).map(str::to_string),
        error: protocol(match event {
            Some(e) => format!("`{}` request: {msg}", clip(e)),
            None => msg.to_string(),
        }),
    }
}

fn parse_init(obj: &Map<String, Value>) -> Result<InitRequest, String> {
    let operation = match obj.get("operation") {
        Some(Value::String(s)) if s == "upload" => Operation::Upload,
        Some(Value::String(s)) if s == "download" => Operation::Download,
        Some(other) => {
            return Err(format!(
                "`operation` must be \"upload\" or \"download\", got {}",
                clip(&other.to_string())
            ))
        }
        None => return Err("missing `operation`".into()),
    };
    let remote = match obj.get("remote") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`remote` must be a string".into()),
    };
    let concurrent = match obj.get("concurrent") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("`concurrent` must be a boolean".into()),
    };
    let concurrent_transfers = match obj.get("concurrenttransfers") {
        None | Some(Value::Null) => 1,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or("`concurrenttransfers` must be a non-negative integer")?,
    };
    Ok(InitRequest {
        operation,
        remote,
        concurrent,
        concurrent_transfers,
    })
}

fn parse_transfer(
    obj: &Map<String, Value>,
    operation: Operation,
) -> Result<TransferRequest, String> {
    let oid = match obj.get("oid") {
        Some(Value::String(s)) => s.parse::<Oid>().map_err(|e| format!("bad `oid`: {e}"))?,
        Some(_) => return Err("`oid` must be a string".into()),
        None => return Err("missing `oid`".into()),
    };
    let size = match obj.get("size") {
        Some(v) => v.as_u64().ok_or("`size` must be a non-negative integer")?,
        None => return Err("missing `size`".into()),
    };
    let path = match obj.get("path") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(PathBuf::from(s)),
        Some(_) => return Err("`path` must be a string".into()),
    };
    if operation == Operation::Upload && path.is_none() {
        return Err("missing `path` of the file to upload".into());
    }
    let action = match obj.get("action") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(parse_action(a)?),
        Some(_) => return Err("`action` must be an object".into()),
    };
    Ok(TransferRequest {
        operation,
        oid,
        size,
        path,
        action,
    })
}

fn parse_action(a: &Map<String, Value>) -> Result<Action, String> {
    let href = match a.get("href") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`action.href` must be a string".into()),
    };
    let mut header = BTreeMap::new();
    match a.get("header") {
        None | Some(Value::Null) => {}
        Some(Value::Object(h)) => {
            for (k, v) in h {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("`action.header.{}` must be a string", clip(k)))?;
                header.insert(k.clone(), v.to_string());
            }
        }
        Some(_) => return Err("`action.header` must be an object".into()),
    }
    Ok(Action { href, header })
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// Error object of an answer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: u32,
    pub message: String,
}

/// An answer on stdout.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Answer {
    /// `{}` after a successful `init`, or `{"error":{...}}`.
    Init {
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorBody>,
    },
    Progress {
        event: &'static str,
        oid: String,
        #[serde(rename = "bytesSoFar")]
        bytes_so_far: u64,
        #[serde(rename = "bytesSinceLast")]
        bytes_since_last: u64,
    },
    Complete {
        event: &'static str,
        oid: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<ErrorBody>,
    },
}

impl Answer {
    pub fn init_ok() -> Answer {
        Answer::Init { error: None }
    }

    pub fn init_error(message: impl Into<String>) -> Answer {
        Answer::Init {
            error: Some(ErrorBody {
                code: INIT_ERROR_CODE,
                message: message.into(),
            }),
        }
    }

    pub fn progress(oid: &Oid, bytes_so_far: u64, bytes_since_last: u64) -> Answer {
        Answer::Progress {
            event: "progress",
            oid: oid.to_hex(),
            bytes_so_far,
            bytes_since_last,
        }
    }

    pub fn complete(oid: &Oid, path: Option<String>) -> Answer {
        Answer::Complete {
            event: "complete",
            oid: oid.to_hex(),
            path,
            error: None,
        }
    }

    /// `oid` as the request wrote it: a malformed request's too.
    pub fn failed(oid: &str, message: impl Into<String>) -> Answer {
        Answer::Complete {
            event: "complete",
            oid: oid.to_string(),
            path: None,
            error: Some(ErrorBody {
                code: TRANSFER_ERROR_CODE,
                message: message.into(),
            }),
        }
    }

    /// The answer as one line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = serde_json::to_string(self).expect("answers serialize");
        s.push('\n');
        s
    }
}

/// One line read from git-lfs.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Longer than [`MAX_LINE_LEN`]; the rest of it was read and dropped.
    TooLong,
    /// Not UTF-8.
    NotUtf8,
    Eof,
}

/// Reads one line with bounded memory: a peer that never sends a newline cannot make us
/// allocate without limit.
pub fn read_line(input: &mut (impl BufRead + ?Sized)) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            if buf.is_empty() && !too_long {
                return Ok(Line::Eof);
            }
            break;
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if !too_long {
            buf.extend_from_slice(&available[..take]);
            if buf.len() > MAX_LINE_LEN + 1 {
                too_long = true;
                buf = Vec::new();
            }
        }
        input.consume(take);
        if done {
            break;
        }
    }
    if too_long {
        return Ok(Line::TooLong);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(String::from_utf8(buf)
        .map(Line::Text)
        .unwrap_or(Line::NotUtf8))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OID: &str = "22ab5f63670800cc7be06dbed816012b0dc411e774754c7579467d2536a9cf3e";

    #[test]
    fn parses_the_documented_requests() {
        let init = Request::parse(
            r#"{ "event":"init", "operation":"download", "remote":"origin", "concurrent": true, "concurrenttransfers": 3 }"#,
        )
        .unwrap();
        assert_eq!(
            init,
            Request::Init(InitRequest {
                operation: Operation::Download,
                remote: "origin".into(),
                concurrent: true,
                concurrent_transfers: 3
            })
        );
        let up = format!(
            r#"{{ "event":"upload", "oid": "{OID}", "size": 346232, "path": "/path/to/file.png", "action": {{ "href": "nfs://server/path", "header": {{ "key": "value" }} }} }}"#
        );
        let Request::Transfer(t) = Request::parse(&up).unwrap() else {
            panic!()
        };
        assert_eq!(t.operation, Operation::Upload);
        assert_eq!(t.size, 346232);
        assert_eq!(
            t.path.as_deref(),
            Some(std::path::Path::new("/path/to/file.png"))
        );
        let action = t.action.unwrap();
        assert_eq!(action.href, "nfs://server/path");
        assert_eq!(action.header("KEY"), Some("value"));
        let down = format!(r#"{{"event":"download","oid":"{OID}","size":21245,"action":null}}"#);
        let Request::Transfer(t) = Request::parse(&down).unwrap() else {
            panic!()
        };
        assert_eq!(
            (t.operation, t.path, t.action),
            (Operation::Download, None, None)
        );
        assert_eq!(
            Request::parse(r#"{"event":"terminate"}"#).unwrap(),
            Request::Terminate
        );
    }

    #[test]
    fn rejects_malformed_requests_with_the_field_named() {
        let cases = [
            ("not json", "not valid JSON"),
            ("[1,2]", "not a JSON object"),
            ("{}", "no `event`"),
            (r#"{"event":5}"#, "`event` must be a string"),
            (r#"{"event":"dance"}"#, "unknown event"),
            (r#"{"event":"init"}"#, "missing `operation`"),
            (
                r#"{"event":"init","operation":"sideways"}"#,
                "`operation` must be",
            ),
            (
                r#"{"event":"init","operation":"upload","concurrent":"yes"}"#,
                "`concurrent`",
            ),
            (
                r#"{"event":"init","operation":"upload","concurrenttransfers":-1}"#,
                "`concurrenttransfers`",
            ),
            (
                r#"{"event":"upload","size":1,"path":"/x"}"#,
                "missing `oid`",
            ),
            (
                r#"{"event":"upload","oid":"abc","size":1,"path":"/x"}"#,
                "bad `oid`",
            ),
            (
                &format!(r#"{{"event":"upload","oid":"{OID}","path":"/x"}}"#),
                "missing `size`",
            ),
            (
                &format!(r#"{{"event":"upload","oid":"{OID}","size":-5,"path":"/x"}}"#),
                "`size` must be",
            ),
            (
                &format!(r#"{{"event":"upload","oid":"{OID}","size":1.5,"path":"/x"}}"#),
                "`size` must be",
            ),
            (
                &format!(r#"{{"event":"upload","oid":"{OID}","size":1}}"#),
                "missing `path`",
            ),
            (
                &format!(r#"{{"event":"download","oid":"{OID}","size":1,"action":"x"}}"#),
                "`action` must be",
            ),
            (
                &format!(
                    r#"{{"event":"download","oid":"{OID}","size":1,"action":{{"header":{{"a":1}}}}}}"#
                ),
                "`action.header.a`",
            ),
        ];
        for (line, expected) in cases {
            let err = Request::parse(line).unwrap_err();
            let msg = err.error.to_string();
            assert!(
                msg.contains(expected),
                "{line}: {msg} (expected {expected:?})"
            );
        }
        let err =
            Request::parse(&format!(r#"{{"event":"upload","oid":"{OID}","size":1}}"#)).unwrap_err();
        assert_eq!(err.oid.as_deref(), Some(OID));
        assert_eq!(err.event.as_deref(), Some("upload"));
    }

    #[test]
    fn answers_serialize_as_documented() {
        assert_eq!(Answer::init_ok().to_line(), "{}\n");
        assert_eq!(
            Answer::init_error("no").to_line(),
            "{\"error\":{\"code\":32,\"message\":\"no\"}}\n"
        );
        assert_eq!(
            Answer::progress(&OID.parse().unwrap(), 10, 4).to_line(),
            format!("{{\"event\":\"progress\",\"oid\":\"{OID}\",\"bytesSoFar\":10,\"bytesSinceLast\":4}}\n")
        );
        assert_eq!(
            Answer::complete(&OID.parse().unwrap(), Some("/tmp/x".into())).to_line(),
            format!("{{\"event\":\"complete\",\"oid\":\"{OID}\",\"path\":\"/tmp/x\"}}\n")
        );
        assert_eq!(
            Answer::failed(OID, "boom").to_line(),
            format!("{{\"event\":\"complete\",\"oid\":\"{OID}\",\"error\":{{\"code\":2,\"message\":\"boom\"}}}}\n")
        );
    }

    #[test]
    fn reads_lines_with_bounded_memory() {
        let mut input = std::io::Cursor::new(b"a\r\nb\n\xff\nlast".to_vec());
        assert_eq!(read_line(&mut input).unwrap(), Line::Text("a".into()));
        assert_eq!(read_line(&mut input).unwrap(), Line::Text("b".into()));
        assert_eq!(read_line(&mut input).unwrap(), Line::NotUtf8);
        assert_eq!(read_line(&mut input).unwrap(), Line::Text("last".into()));
        assert_eq!(read_line(&mut input).unwrap(), Line::Eof);

        let mut long = vec![b'x'; MAX_LINE_LEN + 10];
        long.extend_from_slice(b"\nnext\n");
        let mut input = std::io::BufReader::with_capacity(4096, std::io::Cursor::new(long));
        assert_eq!(read_line(&mut input).unwrap(), Line::TooLong);
        assert_eq!(read_line(&mut input).unwrap(), Line::Text("next".into()));
    }
}
