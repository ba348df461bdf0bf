//! Progress on a terminal: bars on stderr for a person watching, nothing in pipes.
//!
//! Only the programs draw: the libraries report progress through
//! callbacks (`git_xet_client::ProgressFn`, migrate's and the filter's observers) and the
//! programs hand down the bars made here.

use std::io::IsTerminal;
use std::sync::Arc;

/// An indicatif bar on stderr, or nothing when stderr is not a terminal.
pub fn terminal_bar(label: &str, total: u64) -> Option<indicatif::ProgressBar> {
    let bar = bar_with(
        total,
        "{msg:30!} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )?;
    bar.set_message(label.to_string());
    Some(bar)
}

/// A bar of bytes whose message the caller keeps up to date (`3/10 objects`), or nothing
/// when stderr is not a terminal.
pub fn counting_bar(total_bytes: u64, message: String) -> Option<indicatif::ProgressBar> {
    let bar = bar_with(
        total_bytes,
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )?;
    bar.set_message(message);
    Some(bar)
}

fn bar_with(total: u64, template: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    Some(bar)
}

/// A progress callback `(bytes done, total)` that drives `bar` (the shape of
/// `git_xet_client::ProgressFn`).
pub fn bar_callback(bar: indicatif::ProgressBar) -> Arc<dyn Fn(u64, u64) + Send + Sync> {
    Arc::new(move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
}
