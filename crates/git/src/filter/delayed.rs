//! Delayed smudging (gitattributes(5), "Delay"): a missing small object is answered
//! `status=delayed`; when git first asks which delayed files are available
//! (`list_available_blobs`), all of them start downloading together on a thread of their
//! own, and each answer lists the files finished since the last one, waiting for at least
//! one. git writes those while the others download, and asks again until the answer is
//! empty, which it is once every delayed file was listed.
//!
//! git's side of the contract (convert.c, entry.c `finish_delayed_checkout`): each path is
//! listed once, and only a path answered `delayed` before; git then asks for the content of
//! each path listed, with empty content, and only then asks for the list again. A path
//! never listed is not written and fails the checkout, so every delayed file is listed,
//! a failed one too: its answer (git-lfs's turn, or the error) comes when git asks for it.

use std::collections::HashMap;
use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::fetch::{Fetched, Fetcher};
use super::pktline::PktWriter;
use super::smudge::Smudged;
use super::{after_fetch, Filter};
use crate::GitError;
use git_xet_lfs::pointer::Pointer;

/// A file answered `status=delayed`: its path, pointer text and pointer.
pub(super) type DelayedFile = (String, Vec<u8>, Pointer);

/// The delayed files of this filter process and where each stands.
#[derive(Default)]
pub(super) struct Delayed {
    /// Answered `delayed`, not being fetched yet.
    queued: Vec<DelayedFile>,
    /// The fetch under way, with the fetcher it took.
    running: Option<Running>,
    /// Finished, not listed yet.
    finished: Vec<(DelayedFile, Result<Fetched, GitError>)>,
    /// Listed, until git asks for their content.
    available: HashMap<String, Result<Smudged, GitError>>,
}

struct Running {
    results: mpsc::Receiver<(DelayedFile, Result<Fetched, GitError>)>,
    /// Gives the fetcher back once every file is answered.
    thread: JoinHandle<Fetcher>,
}

impl Delayed {
    pub(super) fn queue(&mut self, file: DelayedFile) {
        self.queued.push(file);
    }

    /// The answer for a listed file git now asks for (`None`: not one of them).
    pub(super) fn take_available(&mut self, pathname: &str) -> Option<Result<Smudged, GitError>> {
        self.available.remove(pathname)
    }

    /// Waits for the fetch under way, if any, keeping its results for the next list, and
    /// returns its fetcher.
    fn finish_running(&mut self) -> Option<Fetcher> {
        let running = self.running.take()?;
        self.finished.extend(running.results.iter());
        Some(running.thread.join().expect("the delayed fetch panicked"))
    }
}

impl Filter {
    /// The fetcher, once no delayed fetch holds it.
    pub(super) fn fetcher(&mut self) -> Result<&mut Fetcher, GitError> {
        if let Some(fetcher) = self.delayed.finish_running() {
            self.fetcher = Some(fetcher);
        }
        if self.fetcher.is_none() {
            self.fetcher = Some(Fetcher::new(&self.repo)?);
        }
        Ok(self.fetcher.as_mut().expect("fetcher was just created"))
    }

    /// Waits for the delayed fetch (git closed the pipe): what it stored is settled with
    /// the other whole objects.
    pub(super) fn end_delayed(&mut self) {
        if let Some(fetcher) = self.delayed.finish_running() {
            self.fetcher = Some(fetcher);
        }
        for (file, result) in std::mem::take(&mut self.delayed.finished) {
            self.note_fetched(&file, &result);
        }
    }

    /// Answers `list_available_blobs`: the delayed files finished since the last answer,
    /// waiting for at least one while any is under way; an empty list when none is left.
    /// Returns whether it was that empty list: git then has every delayed file of this
    /// checkout written (it writes each listed file before it asks again).
    pub(super) fn list_available<W: Write>(
        &mut self,
        output: &mut PktWriter<W>,
    ) -> Result<bool, GitError> {
        let mut listed = Vec::new();
        loop {
            listed.extend(std::mem::take(&mut self.delayed.finished));
            if let Some(running) = &self.delayed.running {
                if listed.is_empty() {
                    if let Ok(first) = running.results.recv() {
                        listed.push(first);
                    }
                }
                listed.extend(running.results.try_iter());
                if !listed.is_empty() {
                    break;
                }
                // Every file of that fetch is answered: its fetcher comes back.
                let fetcher = self.delayed.finish_running();
                self.fetcher = fetcher.or(self.fetcher.take());
            }
            if !listed.is_empty() || self.delayed.queued.is_empty() {
                break;
            }
            self.start_delayed();
        }
        listed.sort_by(|a, b| a.0 .0.cmp(&b.0 .0));
        let done = listed.is_empty() && self.delayed.available.is_empty();
        for (file, result) in listed {
            self.note_fetched(&file, &result);
            let (path, text, _) = file;
            output.line(&format!("pathname={path}"))?;
            let answer = after_fetch(result, text, &path);
            self.delayed.available.insert(path, Ok(answer));
        }
        output.flush_packet()?;
        output.line("status=success")?;
        output.flush_packet()?;
        output.send()?;
        Ok(done)
    }

    /// Starts fetching every queued file on a thread that holds the fetcher meanwhile.
    fn start_delayed(&mut self) {
        let files = std::mem::take(&mut self.delayed.queued);
        let bytes: u64 = files.iter().map(|(_, _, p)| p.size).sum();
        self.downloads.batch(files.len(), bytes);
        let mut fetcher = match self.fetcher() {
            Ok(_) => self.fetcher.take().expect("fetcher() made one"),
            Err(e) => {
                let shared = Arc::new(e);
                for file in files {
                    let failed = Err(GitError::Shared(shared.clone()));
                    self.delayed.finished.push((file, failed));
                }
                return;
            }
        };
        let store = self.store.clone();
        let (sender, results) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let wanted: Vec<(&str, &Pointer)> = files
                .iter()
                .map(|(path, _, p)| (path.as_str(), p))
                .collect();
            fetcher.fetch_each(&wanted, &store, &mut |i, result| {
                // The filter stops listening only when git went away: nothing to tell then.
                let _ = sender.send((files[i].clone(), result));
            });
            fetcher
        });
        self.delayed.running = Some(Running { results, thread });
    }

    /// A fetched object is a whole copy git gets: settled when git is done (several paths
    /// may share it).
    fn note_fetched(
        &mut self,
        (path, _, pointer): &DelayedFile,
        result: &Result<Fetched, GitError>,
    ) {
        if let Ok(Fetched::Stored(whole)) = result {
            self.note_whole(path, pointer, whole.clone());
        }
    }
}
