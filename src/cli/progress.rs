//! What the git commands show while they work: the libraries report through callbacks and
//! observers, and these draw it (bars on a terminal, lines on stderr otherwise).

use std::cell::{Cell, RefCell};
use std::io::{IsTerminal, Write};

use crate::common::terminal::{bar_callback, counting_bar, terminal_bar};
use git_xet_client::ProgressFn;
use git_xet_io::human::human_bytes;
use indicatif::{ProgressBar, ProgressFinish};

fn line(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// `git xet migrate`: steps as lines; the uploads as a bar with objects, bytes and rate on a
/// terminal, else one line per object (logs, CI, tests).
#[derive(Default)]
pub struct MigrateDisplay {
    bar: RefCell<Option<ProgressBar>>,
    total: Cell<u64>,
    done: Cell<u64>,
}

impl git_xet_git::migrate::Observer for MigrateDisplay {
    fn step(&self, text: &str) {
        line(text);
    }

    fn uploads_begin(&self, objects: u64, bytes: u64) {
        self.total.set(objects);
        *self.bar.borrow_mut() = counting_bar(bytes, format!("0/{objects} objects"));
    }

    fn object_done(&self, size: u64, what: &str) {
        let n = self.done.get() + 1;
        self.done.set(n);
        match &*self.bar.borrow() {
            Some(bar) => {
                bar.inc(size);
                bar.set_message(format!("{n}/{} objects", self.total.get()));
            }
            None => line(&format!("[{n}/{}] {what}", self.total.get())),
        }
    }

    fn uploads_end(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            bar.finish();
        }
    }
}

/// `git xet filter-process` on a terminal: which files come and how far a large one got
/// (git shows the filter's stderr). Nothing when stderr is not a terminal.
pub struct FilterDownloads;

impl git_xet_git::filter::Downloads for FilterDownloads {
    fn batch(&self, files: usize, bytes: u64) {
        if std::io::stderr().is_terminal() {
            line(&format!(
                "git-xet: downloading {files} files ({})",
                human_bytes(bytes)
            ));
        }
    }

    fn streaming(&self, pathname: &str, size: u64) -> Option<ProgressFn> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        // A line that stays, and a bar that goes when the download ends (the callback is
        // dropped then, and the bar with it).
        line(&format!(
            "git-xet: downloading {pathname} ({})",
            human_bytes(size)
        ));
        let bar = terminal_bar(pathname, size)?.with_finish(ProgressFinish::AndClear);
        Some(bar_callback(bar))
    }
}

/// `git xet quickstart`'s steps.
pub fn quickstart_step(text: &str) {
    line(&format!("==> {text}"));
}
