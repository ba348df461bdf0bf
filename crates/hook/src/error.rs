//! The error type of the pre-receive check.

use thiserror::Error;

/// What can stop the pre-receive check. Every message reaches the pusher (git prints a
/// hook's stderr as `remote: ...`), so each says what failed and where.
#[derive(Debug, Error)]
pub enum HookError {
    /// `git` could not be started at all.
    #[error("cannot run `git`: {0} (is it installed and on PATH?)")]
    Spawn(std::io::Error),
    /// A git command exited with an error.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    /// git answered something its own format does not allow.
    #[error("`{command}` answered {detail}")]
    GitOutput {
        command: &'static str,
        detail: String,
    },
    /// A step of the check (a git process) exited unsuccessfully.
    #[error("{step} exited with {status}")]
    StepFailed {
        step: &'static str,
        status: std::process::ExitStatus,
    },
    /// A setting the check needs is missing from the repository's git config.
    #[error("no {what} configured (set {env} or git config {key})")]
    NotConfigured {
        what: &'static str,
        env: &'static str,
        key: &'static str,
    },
    /// Reading or writing a pipe or file failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
    /// The async runtime for the server requests could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The XET server could not be reached (or the exchange broke).
    #[error("{what}: cannot reach the XET server at {server}: {source}")]
    ServerUnreachable {
        server: String,
        what: &'static str,
        source: reqwest::Error,
    },
    /// The XET server answered with an error status.
    #[error("{what}: the XET server at {server} answered HTTP {status}: {body}")]
    ServerRefused {
        server: String,
        what: &'static str,
        status: u16,
        body: String,
    },
    /// The XET server answered something malformed.
    #[error("{what}: the XET server at {server} answered {detail}")]
    ServerAnswer {
        server: String,
        what: &'static str,
        detail: String,
    },
}

impl HookError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> HookError {
        HookError::Io {
            context: context.into(),
            source,
        }
    }
}
