//! Logging setup shared by all commands: tracing to stderr, or to the file named by
//! `GIT_XET_LOG`. Verbosity comes from `GIT_XET_LOG_LEVEL` (a tracing filter such as `debug`
//! or `git_xet=trace`), or `debug` when git's `GIT_TRACE` is set to a true value, or the
//! command's default. stdout is never used: it belongs to command output and to git-lfs.

use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

/// How log lines are written: for people, or one JSON object per line (json_log.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber. `default_level` applies when nothing else is configured.
pub fn init(default_level: &str) {
    init_with(default_level, LogFormat::Text)
}

/// [`init`] with a choice of format.
pub fn init_with(default_level: &str, format: LogFormat) {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let level = std::env::var("GIT_XET_LOG_LEVEL")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| git_trace_enabled().then(|| "debug".to_string()))
        .unwrap_or_else(|| default_level.to_string());
    let filter = EnvFilter::try_new(&level).unwrap_or_else(|_| EnvFilter::new(default_level));
    let file = std::env::var_os("GIT_XET_LOG")
        .filter(|s| !s.is_empty())
        .and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        });
    // Colour only for a person at a terminal, never in files, pipes or git's trace output.
    let ansi = file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let writer = match file {
        Some(file) => BoxMakeWriter::new(Mutex::new(file)),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder.with_target(false).with_ansi(ansi).try_init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .fmt_fields(super::json_log::JsonFields)
            .event_format(super::json_log::JsonEvent)
            .try_init(),
    };
}

fn git_trace_enabled() -> bool {
    match std::env::var("GIT_TRACE") {
        Ok(v) => !matches!(v.as_str(), "" | "0" | "false" | "no" | "off"),
        Err(_) => false,
    }
}

/// Prints an error and its causes on one line to stderr, `<program>: error: a: b: c`, as
/// both programs report a failed command.
pub fn report_error(err: &(dyn std::error::Error + 'static)) {
    use std::io::Write;
    // A closed stdout (e.g. `| head`) is not worth reporting.
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            return;
        }
    }
    let line = git_xet_io::error_chain::chain(err);
    let _ = writeln!(std::io::stderr(), "git-xet: error: {line}");
}
