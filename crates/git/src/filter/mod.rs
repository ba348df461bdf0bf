//! `git xet filter-process`: git's long-running filter (gitattributes(5), "Long Running
//! Filter Process") for `filter=lfs` files, a drop-in for `git lfs filter-process`.
//!
//! Why it exists: with git-lfs's filter, every large file a checkout or pull brings in is
//! hashed again by git-lfs after the transfer agent already verified it, and every clean
//! (including git's re-check of files written in the same second as the index) hashes it
//! with a sha256 several times slower than this one. Here a missing object is fetched
//! through XET straight into the object store (verified once, while written), smudged from
//! there, and cleaned with one pass that hashes and stores.
//!
//! | module      | job                                                                 |
//! |-------------|---------------------------------------------------------------------|
//! | [`pktline`] | pkt-line framing (gix-packetline), content spliced into git's pipe  |
//! | [`clean`]   | content -> pointer, storing the object                              |
//! | [`smudge`]  | pointer -> content; pass-through and the `git lfs smudge` fallback |
//! | `delayed`   | delayed smudging: files listed to git as their downloads finish     |
//! | [`fetch`]   | missing objects through the Batch API and XET                       |
//! | `recheck`   | whether a clean is git re-checking an unchanged, stored file        |
//! | [`store`]   | `.git/lfs/objects` and its temp directory                           |
//! | `stream`    | a large object handed to git while it downloads                     |
//!
//! Per request, every byte git sends is read before anything is answered (git writes the
//! whole blob first), and a failure of one file is answered `status=error` for that file
//! only; just a broken pipe to git or a protocol violation ends the process.
//!
//! Checkouts of many files use git's delayed smudging (`delayed`): a missing object is
//! answered `status=delayed`, and when git first asks which delayed files are available,
//! all of them start downloading together (one Batch API request per hundred objects,
//! shared objects once); each answer lists those finished since the last.
//! Large missing objects are not delayed but streamed: git receives each chunk as it is
//! written to the store, and the final status says whether the whole object verified.

pub mod clean;
mod compare;
mod delayed;
pub mod fetch;
mod index_reader;
mod local;
pub mod pktline;
mod recheck;
pub mod smudge;
mod stream;

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::ExitCode;

use crate::repo::Repo;
use crate::GitError;
use fetch::{Fetched, Fetcher};
use git_xet_client::chunk_lists::ChunkListStore;
use git_xet_client::store::ChunkStore;
use git_xet_client::{ContentTap, ProgressFn};
use git_xet_lfs::pointer::Pointer;
use git_xet_lfs::store::{self, LfsStore};
use pktline::{PktReader, PktWriter};
use smudge::{Input, Smudged};

/// Missing objects at least this large are fetched when git asks for them and streamed to
/// git as they are written, rather than delayed and fetched with the others
/// (`GIT_XET_STREAM_THRESHOLD` overrides it, in bytes).
const STREAM_THRESHOLD: u64 = 64 << 20;
/// Pieces (chunks, about 64 KiB each) a streamed download may run ahead of git.
const STREAM_QUEUE: usize = 256;

/// What a person at a terminal sees while the filter downloads (git shows the filter's
/// stderr). The program draws it and hands it down; the filter only says what happens.
pub trait Downloads: Send + Sync {
    /// Delayed files are fetched together: how many, and their bytes.
    fn batch(&self, _files: usize, _bytes: u64) {}
    /// A large object streams to git: where its progress goes (nowhere: `None`). What is
    /// returned is dropped when the download ends, however it ends.
    fn streaming(&self, _pathname: &str, _size: u64) -> Option<ProgressFn> {
        None
    }
}

/// Shows nothing.
pub struct Quiet;

impl Downloads for Quiet {}

/// Runs the filter on stdin/stdout until git closes the pipe.
pub fn run_stdio(downloads: Box<dyn Downloads>) -> anyhow::Result<ExitCode> {
    // git waits for the filter's handshake: one configuration read instead of one per key,
    // asked together with the discovery.
    let repo = Repo::current_with_config()?;
    if let Some(why) = needs_git_lfs_filter(&repo)? {
        tracing::info!("handing the filter over to git-lfs: {why}");
        let err = std::process::Command::new("git")
            .args(["lfs", "filter-process"])
            .exec();
        anyhow::bail!("cannot run `git lfs filter-process` ({why}): {err}");
    }
    ensure_lfs_hooks(&repo);
    enlarge_pipes();
    let stdin = std::io::stdin();
    let mut filter = Filter::new(repo).with_downloads(downloads);
    let reader = PktReader::new(stdin.lock());
    // The writer buffers itself; std's stdout would add a line buffer that scans content.
    let stdout = std::io::stdout();
    let writer = PktWriter::new(std::fs::File::from(stdout.as_fd().try_clone_to_owned()?))
        .splicing_into(stdout.as_fd());
    filter.serve(reader, writer)?;
    Ok(ExitCode::SUCCESS)
}

/// git's pipes hold 64 KiB, one packet: handing over a large file would take a context switch
/// per packet. A bigger pipe (up to the unprivileged limit) lets each side move a megabyte at
/// a time. Failure (not a pipe, older kernel) only costs speed.
fn enlarge_pipes() {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    for (fd, pipe) in [(0, stdin.as_fd()), (1, stdout.as_fd())] {
        if let Err(e) = git_xet_io::platform::pipe::enlarge(pipe, 1 << 20) {
            tracing::debug!(fd, "could not enlarge the pipe: {e}");
        }
    }
}

/// Settings this filter does not implement, for which git-lfs's own filter must run.
fn needs_git_lfs_filter(repo: &Repo) -> Result<Option<String>, GitError> {
    let extensions = repo.config().with_prefix("lfs.extension.")?;
    Ok((!extensions.is_empty()).then(|| "LFS extensions are configured".to_string()))
}

/// git-lfs's filter installs its hooks (pre-push above all: without it `git push` sends
/// pointers but no objects) in every repository it runs in, which is how a fresh clone gets
/// them. Standing in for it, do the same with `git lfs update`, which writes only hooks.
fn ensure_lfs_hooks(repo: &Repo) {
    // Hooks live in the common directory unless core.hooksPath moves them; git resolves
    // that setting (relative paths, `~`), so only then is it asked.
    let hook = match repo.config().get(None, "core.hookspath") {
        Ok(None) => Ok(repo.common_dir.join("hooks").join("pre-push")),
        _ => repo
            .git()
            .run([
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                "hooks/pre-push",
            ])
            .map(std::path::PathBuf::from),
    };
    if matches!(&hook, Ok(path) if path.exists()) {
        return;
    }
    match repo.git().run(["lfs", "update"]) {
        Ok(_) => tracing::debug!("installed git-lfs's hooks"),
        // A hook of the user's is in the way: theirs to merge (`git lfs update` says how).
        // Quiet, as git-lfs's filter is: this runs at every git command that filters.
        Err(e) => tracing::debug!("could not install git-lfs's hooks: {e}"),
    }
}

/// One request's header list.
struct Request {
    command: String,
    pathname: String,
    /// git accepts `status=delayed` for this smudge.
    can_delay: bool,
}

impl Request {
    fn parse(lines: &[Vec<u8>]) -> Result<Request, GitError> {
        let mut command = None;
        let mut pathname = None;
        let mut can_delay = false;
        for line in lines {
            let text = String::from_utf8_lossy(line);
            match text.split_once('=') {
                Some(("command", v)) => command = Some(v.to_string()),
                Some(("pathname", v)) => pathname = Some(v.to_string()),
                Some(("can-delay", v)) => can_delay = v == "1",
                Some(_) => {} // ref, treeish, blob: informational
                None => {
                    return Err(GitError::FilterProtocol(format!(
                        "request line {text:?} is not key=value"
                    )))
                }
            }
        }
        Ok(Request {
            command: command
                .ok_or_else(|| GitError::FilterProtocol("request without a command".into()))?,
            pathname: pathname.unwrap_or_default(),
            can_delay,
        })
    }
}

pub struct Filter {
    repo: Repo,
    store: LfsStore,
    /// Where clean records the chunks of what it stores, for the push.
    chunk_lists: ChunkListStore,
    skip_smudge: bool,
    /// `lfs.fetchinclude`/`lfs.fetchexclude` decide per path; git-lfs applies them.
    fetch_filters: bool,
    fetcher: Option<Fetcher>,
    /// git and the filter agreed on delayed smudging.
    delay: bool,
    /// Files answered `status=delayed`, their fetch and what is listed (delayed.rs).
    delayed: delayed::Delayed,
    /// Missing objects from this size on are streamed, never delayed.
    stream_threshold: u64,
    /// The per-user chunk store, opened when first needed (`None` inside: turned off).
    chunk_store: Option<Option<ChunkStore>>,
    /// Whole objects git got, kept or dropped once git closes the pipe (local.rs).
    wholes: local::Wholes,
    /// The index's pointers for re-cleans, one `git cat-file` for the process's life.
    index: std::cell::RefCell<index_reader::IndexReader>,
    /// git's index file, read at the first re-clean that needs it.
    index_file: std::cell::RefCell<recheck::IndexFileState>,
    downloads: Box<dyn Downloads>,
}

impl Filter {
    pub fn new(repo: Repo) -> Filter {
        let config = repo.config();
        let has = |key: &str| config.get(None, key).ok().flatten().is_some();
        let fetch_filters = has("lfs.fetchinclude") || has("lfs.fetchexclude");
        Filter {
            store: repo.lfs_store(),
            chunk_lists: ChunkListStore::new(&repo.xet_dir()),
            skip_smudge: env_flag("GIT_LFS_SKIP_SMUDGE"),
            fetch_filters,
            fetcher: None,
            delay: false,
            delayed: Default::default(),
            stream_threshold: std::env::var("GIT_XET_STREAM_THRESHOLD")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(STREAM_THRESHOLD),
            downloads: Box::new(Quiet),
            chunk_store: None,
            index: Default::default(),
            index_file: Default::default(),
            wholes: local::Wholes::new(
                crate::store::keep_objects(&repo),
                crate::store::keep_checked_out(&repo),
            ),
            repo,
        }
    }

    /// Shows downloads through `downloads` (the default shows nothing).
    pub fn with_downloads(mut self, downloads: Box<dyn Downloads>) -> Filter {
        self.downloads = downloads;
        self
    }

    /// The handshake, then requests until git closes the pipe.
    pub fn serve<R: Read, W: Write + Send>(
        &mut self,
        mut input: PktReader<R>,
        mut output: PktWriter<W>,
    ) -> Result<(), GitError> {
        self.delay = handshake(&mut input, &mut output)?;
        while let Some(lines) = input.read_list()? {
            let request = Request::parse(&lines)?;
            let started = std::time::Instant::now();
            match request.command.as_str() {
                "clean" => {
                    let chunks = match self.wholes.keep_objects() {
                        true => None,
                        false => self.chunks().cloned(),
                    };
                    let recheck = recheck::IndexRecheck {
                        repo: &self.repo,
                        pathname: &request.pathname,
                        chunks: chunks.as_ref(),
                        index: &self.index,
                        index_file: &self.index_file,
                    };
                    let result =
                        clean::clean(&mut input, &self.store, &self.chunk_lists, &recheck)?;
                    if let Some(pointer) = result.as_deref().ok().and_then(Pointer::detect) {
                        // A new version of the file (`git add`), not git re-checking the
                        // index's: what `git xet materialize` or git-lfs put whole stays so.
                        let recheck = self.index_file.borrow_mut().has_exactly(
                            &self.repo,
                            &request.pathname,
                            &pointer,
                        );
                        if !recheck {
                            self.note_cleaned(&request.pathname, pointer.oid);
                        }
                    }
                    respond(&mut output, &request, result.map(Smudged::Bytes))?;
                }
                "smudge" => {
                    let input = smudge::read_input(&mut input, &self.store)?;
                    // The second request for a delayed file comes with empty content.
                    let delayed = match &input {
                        Ok(Input::Other(Smudged::Bytes(b))) if b.is_empty() => {
                            self.delayed.take_available(&request.pathname)
                        }
                        _ => None,
                    };
                    let result = match delayed {
                        Some(result) => result,
                        None => input.and_then(|i| self.smudged(i, &request)),
                    };
                    match result {
                        Ok(Smudged::Fetch { text, pointer }) => {
                            self.stream(&mut output, &request, text, &pointer)?
                        }
                        other => respond(&mut output, &request, other)?,
                    }
                }
                "list_available_blobs" if self.delay => {
                    if self.list_available(&mut output)? {
                        // Every file of the checkout is written: its whole copies settle
                        // while git goes on (its index, its hooks), not while it waits for
                        // this process at its exit.
                        self.settle_wholes();
                    }
                }
                other => {
                    return Err(GitError::FilterProtocol(format!(
                        "unknown command {other:?} (only clean, smudge and delay were offered)"
                    )))
                }
            }
            tracing::debug!(
                command = %request.command,
                path = %request.pathname,
                secs = started.elapsed().as_secs_f64(),
                "answered"
            );
        }
        self.end_delayed();
        self.settle_wholes();
        Ok(())
    }

    /// Where a smudged file's content comes from.
    fn smudged(&mut self, input: Input, request: &Request) -> Result<Smudged, GitError> {
        let pathname = request.pathname.as_str();
        let (text, pointer) = match input {
            Input::Other(content) => return Ok(content),
            Input::Pointer { text, pointer } => (text, pointer),
        };
        if self.skip_smudge {
            return Ok(Smudged::Bytes(text));
        }
        if !pointer.extra.is_empty() {
            return Ok(Smudged::GitLfs(text));
        }
        if let Some(path) = self.store.find(&pointer.oid, pointer.size) {
            self.note_found(pathname, &pointer, path.clone());
            return Ok(Smudged::File { path, temp: false });
        }
        if self.fetch_filters {
            return Ok(Smudged::GitLfs(text));
        }
        if let Some(path) = self.rebuild_local(pathname, &pointer) {
            return Ok(Smudged::File { path, temp: false });
        }
        if self.delay && request.can_delay && pointer.size < self.stream_threshold {
            self.delayed.queue((pathname.to_string(), text, pointer));
            return Ok(Smudged::Delayed);
        }
        Ok(Smudged::Fetch { text, pointer })
    }

    /// Fetches a missing object and streams it to git while it is written to the store.
    ///
    /// git keeps what a filter sends in memory and writes the file only after the final
    /// status, and drops it when that is `error` (`filter.lfs.required`, which git-lfs sets,
    /// makes the checkout fail). So the bytes, each chunk checked as it arrives, go to git
    /// at once, and the verdict on the whole object (length, XET file hash, sha256) comes
    /// after them: a bad object never reaches the working tree, and a good one is not read
    /// back from disk after its download.
    fn stream<W: Write + Send>(
        &mut self,
        output: &mut PktWriter<W>,
        request: &Request,
        text: Vec<u8>,
        pointer: &Pointer,
    ) -> Result<(), GitError> {
        let store = self.store.clone();
        if let Err(e) = self.fetcher() {
            let smudged = after_fetch(Err(e), text, &request.pathname);
            return respond(output, request, Ok(smudged));
        }
        let progress = self.downloads.streaming(&request.pathname, pointer.size);
        let fetcher = self.fetcher.as_mut().expect("the fetcher was made above");
        let (tap, pieces) = ContentTap::new(STREAM_QUEUE);
        let (fetched, forwarded) = std::thread::scope(|scope| {
            let forwarder = scope.spawn(|| stream::forward(pieces, &mut *output));
            // Closed however the fetch ends (a panic too): the forwarder waits for that.
            let closing = stream::CloseOnDrop(&tap);
            let fetched =
                fetcher.fetch_tapped(pointer, &request.pathname, &store, tap.clone(), progress);
            drop(closing);
            let forwarded = forwarder.join().expect("the forwarding thread panicked");
            (fetched, forwarded)
        });
        let whole = match &fetched {
            Ok(Fetched::Stored(path)) => Some(path.clone()),
            _ => None,
        };
        if !forwarded? {
            // Nothing was sent: the stored object, or git-lfs's turn.
            if let Some(path) = whole {
                self.note_whole(&request.pathname, pointer, path);
            }
            let smudged = after_fetch(fetched, text, &request.pathname);
            return respond(output, request, Ok(smudged));
        }
        output.flush_packet()?;
        let verdict = match fetched {
            Ok(Fetched::Stored(_)) if tap.diverged() => Err(GitError::StreamDiverged),
            Ok(Fetched::Stored(_)) if tap.forwarded() == pointer.size => Ok(()),
            Ok(_) => Err(GitError::StreamIncomplete {
                sent: tap.forwarded(),
                size: pointer.size,
            }),
            Err(e) => Err(e),
        };
        match verdict {
            Ok(()) => {
                tracing::debug!(bytes = pointer.size, "streamed {}", request.pathname);
                if let Some(path) = whole {
                    self.note_whole(&request.pathname, pointer, path);
                }
                output.flush_packet()?
            }
            Err(e) => {
                report(request, &e);
                output.line("status=error")?;
                output.flush_packet()?;
            }
        }
        output.send()
    }
}

/// Where a fetch that sent git nothing leaves the file: the stored object, else git-lfs's
/// turn, whatever failed (an unreachable or refusing server, a failed ssh login, a failed
/// download): git-lfs may still get the object its own way, and does what it would have
/// done without git-xet.
pub(super) fn after_fetch(
    result: Result<Fetched, GitError>,
    pointer_text: Vec<u8>,
    path: &str,
) -> Smudged {
    match result {
        Ok(Fetched::Stored(path)) => Smudged::File { path, temp: false },
        Ok(Fetched::GitLfs(why)) => {
            tracing::debug!(path, "handing the object to git-lfs: {why}");
            Smudged::GitLfs(pointer_text)
        }
        Err(e) => {
            tracing::debug!(path, "handing the object to git-lfs after a failure: {e}");
            Smudged::GitLfs(pointer_text)
        }
    }
}

/// Capabilities git offers; this filter takes clean, smudge and delay. Returns whether
/// delayed smudging was agreed.
fn handshake<R: Read, W: Write>(
    input: &mut PktReader<R>,
    output: &mut PktWriter<W>,
) -> Result<bool, GitError> {
    let bad = |msg: String| GitError::FilterProtocol(msg);
    let hello = input
        .read_list()?
        .ok_or_else(|| bad("git closed the pipe before the handshake".into()))?;
    if hello.first().map(Vec::as_slice) != Some(b"git-filter-client") {
        return Err(bad(
            "expected `git-filter-client` (is this being run by git as filter.lfs.process?)".into(),
        ));
    }
    if !hello.iter().any(|l| l == b"version=2") {
        return Err(bad("git does not offer filter protocol version 2".into()));
    }
    output.line("git-filter-server")?;
    output.line("version=2")?;
    output.flush_packet()?;
    output.send()?;
    let offered = input
        .read_list()?
        .ok_or_else(|| bad("git closed the pipe during the handshake".into()))?;
    let mut delay = false;
    for capability in ["clean", "smudge", "delay"] {
        let line = format!("capability={capability}");
        if offered.iter().any(|l| l == line.as_bytes()) {
            output.line(&line)?;
            delay |= capability == "delay";
        }
    }
    output.flush_packet()?;
    output.send()?;
    Ok(delay)
}

/// Answers one request: `status=success`, the content, and an empty list that keeps the
/// status; or `status=error` when the file failed (after any content already sent).
fn respond<W: Write>(
    output: &mut PktWriter<W>,
    request: &Request,
    result: Result<Smudged, GitError>,
) -> Result<(), GitError> {
    let content = match result {
        Ok(Smudged::Delayed) => {
            output.line("status=delayed")?;
            output.flush_packet()?;
            return output.send();
        }
        Ok(c) => c,
        Err(e) => {
            report(request, &e);
            output.line("status=error")?;
            output.flush_packet()?;
            return output.send();
        }
    };
    output.line("status=success")?;
    output.flush_packet()?;
    let sent = match content {
        Smudged::Bytes(bytes) => {
            output.data(&bytes)?;
            Ok(())
        }
        Smudged::File { path, temp } => {
            let _guard = store::TempGuard(temp.then(|| path.clone()));
            match std::fs::File::open(&path) {
                Ok(mut f) => output.copy_file(&mut f)?.map(|_| ()),
                Err(e) => Err(GitError::io(format!("opening {}", path.display()), e)),
            }
        }
        Smudged::GitLfs(text) => {
            smudge::via_git_lfs(&text, &request.pathname, &mut |d| output.data(d))?
        }
        Smudged::Delayed => unreachable!("answered above"),
        Smudged::Fetch { .. } => unreachable!("streamed by Filter::stream"),
    };
    output.flush_packet()?;
    match sent {
        Ok(()) => output.flush_packet()?,
        Err(e) => {
            report(request, &e);
            output.line("status=error")?;
            output.flush_packet()?;
        }
    }
    output.send()
}

fn report(request: &Request, e: &GitError) {
    // The filter's voice: git shows its stderr to the user, and this line is all they learn
    // about why one file failed (git itself only says the filter failed).
    tracing::debug!(path = %request.pathname, "{} failed: {e}", request.command);
    eprintln!("git-xet: {} of {}: {e}", request.command, request.pathname);
}

/// git-lfs's reading of boolean environment variables.
fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_need_a_command_and_key_value_lines() {
        let r = Request::parse(&[
            b"command=clean".to_vec(),
            b"pathname=a=b.bin".to_vec(),
            b"can-delay=1".to_vec(),
        ])
        .unwrap();
        assert_eq!(
            (r.command.as_str(), r.pathname.as_str()),
            ("clean", "a=b.bin")
        );
        assert!(Request::parse(&[b"pathname=x".to_vec()]).is_err());
        assert!(Request::parse(&[b"command=clean".to_vec(), b"junk".to_vec()]).is_err());
    }
}
