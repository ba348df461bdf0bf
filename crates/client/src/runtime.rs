//! The process's one tokio runtime, for the client side's synchronous callers (the agent, the
//! filter, the CLI commands, [`crate::BlockingClient`]): built on first use, so a process
//! that never makes a request (a filter that only cleans) never starts one, and built once,
//! however many layers block on it. [`shutdown`] drops it at the end of the process, which
//! cancels what is left running as dropping a runtime does.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::runtime::{Handle, Runtime};

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
static BUILT: AtomicUsize = AtomicUsize::new(0);

/// The debug event logged when the runtime is built (tests count them per process).
pub const BUILT_EVENT: &str = "git-xet: the process's async runtime is built";

/// A handle of the process's runtime, built now if it is not yet. Fails only if the
/// operating system refuses its threads.
pub fn handle() -> std::io::Result<Handle> {
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(runtime) = slot.as_ref() {
        return Ok(runtime.handle().clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("git-xet")
        .build()?;
    let built = BUILT.fetch_add(1, Ordering::Relaxed) + 1;
    tracing::debug!(pid = std::process::id(), built, "{BUILT_EVENT}");
    let handle = runtime.handle().clone();
    *slot = Some(runtime);
    Ok(handle)
}

/// Runs `future` to completion on the process's runtime. Not from inside a runtime.
pub fn block_on<F: Future>(future: F) -> std::io::Result<F::Output> {
    Ok(handle()?.block_on(future))
}

/// How many runtimes this process has built (one, or none if it never needed one).
pub fn built() -> usize {
    BUILT.load(Ordering::Relaxed)
}

/// Drops the runtime, if one was built: tasks still running are cancelled. Call it where the
/// process ends, outside any runtime.
pub fn shutdown() {
    let runtime = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(runtime) = runtime {
        // As the agent always did: a few seconds for blocking work to end, not forever.
        runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The client side (every crate but the server, and the `git-xet` program) builds
    /// runtimes only here.
    #[test]
    fn no_other_client_side_code_builds_a_runtime() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in [
            "crates/core",
            "crates/io",
            "crates/client",
            "crates/lfs",
            "crates/git",
        ] {
            rust_files(&root.join(dir).join("src"), &mut files);
        }
        rust_files(&root.join("src/cli"), &mut files);
        let this = Path::new(file!()).file_name().unwrap();
        let builders: Vec<String> = files
            .iter()
            .filter(|f| !(f.ends_with(Path::new("client/src").join(this))))
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                text.contains(concat!("runtime::", "Builder"))
                    || text.contains(concat!("Runtime::", "new"))
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(builders.is_empty(), "runtimes built in {builders:?}");
    }

    #[test]
    fn one_runtime_however_many_callers() {
        let threads: Vec<_> = (0..4)
            .map(|i| std::thread::spawn(move || super::block_on(async move { i * 2 }).unwrap()))
            .collect();
        let sum: i32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(sum, 12);
        assert_eq!(super::built(), 1);
    }
}
