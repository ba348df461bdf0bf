//! The custom transfer agent's state machine: `init` -> (`upload` | `download`)* ->
//! `terminate`.
//!
//! Rules, so that git-lfs never waits for an answer that does not come:
//! - every request line gets exactly one final answer (`{}`/error for `init`, `complete` for a
//!   transfer), `terminate` none;
//! - a failed object answers `complete` with error code 2 and the agent goes on;
//! - a malformed or out-of-order request is answered with an error naming what was wrong and
//!   the agent goes on; only `terminate`, end of input, or a broken stdout end it;
//! - a panic inside the backend becomes that object's error instead of killing the process.

use std::io::BufRead;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use crate::progress::{AnswerSink, Progress};
use crate::protocol::{read_line, Answer, InitRequest, Line, Operation, Request, TransferRequest};
use crate::LfsError;

/// What moves the bytes. The agent owns the protocol; the backend owns the transfers.
pub trait TransferBackend {
    /// One-off setup for the session. An error is answered with code 32.
    fn init(&mut self, init: &InitRequest) -> Result<(), LfsError>;
    /// Uploads `req.path`. Must return only once the object is durably on the server.
    fn upload(&mut self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError>;
    /// Downloads the object into a file that git-lfs may rename into its store; returns
    /// that file's path.
    fn download(&mut self, req: &TransferRequest, progress: &Progress)
        -> Result<PathBuf, LfsError>;
    /// Cleanup after `terminate`.
    fn terminate(&mut self) {}
}

/// How a session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// git-lfs sent `terminate`.
    Terminated,
    /// stdin closed without `terminate` (git-lfs went away).
    InputClosed,
}

/// Counts of what a session did, for the final log line and tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    pub succeeded: u64,
    pub failed: u64,
    pub bad_requests: u64,
}

enum State {
    AwaitingInit,
    Ready(Operation),
}

/// Runs one agent session over `input`, answering into `sink`. Returns when git-lfs ends the
/// session; an `Err` means the answer channel broke (nothing more can be said to git-lfs).
pub fn run(
    backend: &mut dyn TransferBackend,
    input: &mut dyn BufRead,
    sink: &AnswerSink,
) -> Result<(Ending, SessionStats), LfsError> {
    let mut state = State::AwaitingInit;
    let mut stats = SessionStats::default();
    loop {
        let line = match read_line(input)? {
            Line::Eof => {
                tracing::warn!("git-lfs closed the connection without `terminate`");
                return Ok((Ending::InputClosed, stats));
            }
            Line::TooLong => {
                stats.bad_requests += 1;
                sink.send(&Answer::failed(
                    "",
                    "protocol error: request line longer than 1 MiB",
                ))?;
                continue;
            }
            Line::NotUtf8 => {
                stats.bad_requests += 1;
                sink.send(&Answer::failed("", "protocol error: request is not UTF-8"))?;
                continue;
            }
            Line::Text(t) if t.trim().is_empty() => continue,
            Line::Text(t) => t,
        };
        tracing::trace!(request = %redact(&line), "from git-lfs");
        let request = match Request::parse(&line) {
            Ok(r) => r,
            Err(bad) => {
                stats.bad_requests += 1;
                tracing::error!("{}", bad.error);
                let answer = match (&state, bad.event.as_deref()) {
                    (_, Some("init")) => Answer::init_error(bad.error.to_string()),
                    _ => Answer::failed(bad.oid.as_deref().unwrap_or(""), bad.error.to_string()),
                };
                sink.send(&answer)?;
                continue;
            }
        };
        match (request, &state) {
            (Request::Terminate, _) => {
                backend.terminate();
                tracing::debug!(?stats, "terminate");
                return Ok((Ending::Terminated, stats));
            }
            (Request::Init(init), State::AwaitingInit) => match guarded(|| backend.init(&init)) {
                Ok(()) => {
                    tracing::debug!(operation = init.operation.as_str(), remote = %init.remote, "init");
                    state = State::Ready(init.operation);
                    sink.send(&Answer::init_ok())?;
                }
                Err(e) => {
                    tracing::error!("init failed: {}", chain(&e));
                    sink.send(&Answer::init_error(chain(&e)))?;
                }
            },
            (Request::Init(_), State::Ready(op)) => {
                stats.bad_requests += 1;
                let msg = format!(
                    "protocol error: `init` received twice (session is already {})",
                    op.as_str()
                );
                sink.send(&Answer::init_error(msg))?;
            }
            (Request::Transfer(t), State::AwaitingInit) => {
                stats.bad_requests += 1;
                let msg = format!("protocol error: `{}` before `init`", t.operation.as_str());
                sink.send(&Answer::failed(&t.oid.to_hex(), msg))?;
            }
            (Request::Transfer(t), State::Ready(op)) if t.operation != *op => {
                stats.bad_requests += 1;
                let msg = format!(
                    "protocol error: `{}` request in a session initialised for {}",
                    t.operation.as_str(),
                    op.as_str()
                );
                sink.send(&Answer::failed(&t.oid.to_hex(), msg))?;
            }
            (Request::Transfer(t), State::Ready(_)) => {
                let ok = transfer(backend, &t, sink)?;
                if ok {
                    stats.succeeded += 1;
                } else {
                    stats.failed += 1;
                }
            }
        }
    }
}

/// Runs one transfer and answers it. `Ok(false)` when the object failed.
fn transfer(
    backend: &mut dyn TransferBackend,
    t: &TransferRequest,
    sink: &AnswerSink,
) -> Result<bool, LfsError> {
    let oid = t.oid.to_hex();
    let progress = Progress::new(sink.clone(), &t.oid, t.size);
    let started = std::time::Instant::now();
    let result = match t.operation {
        Operation::Upload => guarded(|| backend.upload(t, &progress)).map(|()| None),
        Operation::Download => guarded(|| backend.download(t, &progress)).and_then(|p| {
            p.into_os_string()
                .into_string()
                .map(Some)
                .map_err(|p| LfsError::Protocol(format!("download path {p:?} is not UTF-8")))
        }),
    };
    match result {
        Ok(path) => {
            progress.finish()?;
            tracing::info!(oid = %oid, size = t.size, secs = started.elapsed().as_secs_f64(), "{} done", t.operation.as_str());
            sink.send(&Answer::complete(&t.oid, path))?;
            Ok(true)
        }
        Err(e) => {
            let msg = chain(&e);
            tracing::error!(oid = %oid, "{} failed: {msg}", t.operation.as_str());
            sink.send(&Answer::failed(&oid, msg))?;
            Ok(false)
        }
    }
}

/// Calls into the backend, turning a panic into an error so the session survives it.
fn guarded<T>(f: impl FnOnce() -> Result<T, LfsError>) -> Result<T, LfsError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(LfsError::Internal(format!(
                "internal error (please report): {what}"
            )))
        }
    }
}

/// An error and its causes on one line.
pub use git_xet_io::error_chain::chain;

/// The request with header values removed: actions carry access tokens, never logged.
fn redact(line: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(mut v) => {
            if let Some(h) = v
                .pointer_mut("/action/header")
                .and_then(|h| h.as_object_mut())
            {
                for value in h.values_mut() {
                    *value = serde_json::Value::String("<redacted>".into());
                }
            }
            v.to_string()
        }
        Err(_) => format!("<{} bytes of invalid JSON>", line.len()),
    }
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
