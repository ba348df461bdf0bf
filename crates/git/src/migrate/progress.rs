//! What `migrate` shows while it uploads: a bar with objects, bytes and rate on a terminal;
//! one line per object otherwise (logs, CI, tests).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::lfs_objects::LfsObject;

pub struct MigrateProgress {
    bar: Option<indicatif::ProgressBar>,
    total: u64,
    done: AtomicU64,
}

impl MigrateProgress {
    /// Progress over `objects`; a bar only when stderr is a terminal.
    pub fn new(objects: &[LfsObject]) -> MigrateProgress {
        let total_bytes = objects.iter().map(|o| o.size).sum();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total_bytes),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(format!("0/{} objects", objects.len()));
            bar
        });
        MigrateProgress {
            bar,
            total: objects.len() as u64,
            done: AtomicU64::new(0),
        }
    }

    /// One object is on the server (uploaded now, or found there).
    pub fn object_done(&self, obj: &LfsObject, what: &str) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => {
                bar.inc(obj.size);
                bar.set_message(format!("{n}/{} objects", self.total));
            }
            None => {
                let _ = writeln!(std::io::stderr(), "[{n}/{}] {what}", self.total);
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
