//! The process's one tokio runtime, for both programs: built on first use, so a process that
//! never makes a request (a filter that only cleans) never starts one, and built once,
//! however many layers block on it. The client side's synchronous callers (the agent, the
//! filter, the client's blocking client) and the server's CLI run on it; the server's
//! backends that drive I/O of their own (the PostgreSQL pool's connections, the S3 probe)
//! spawn onto it instead of building runtimes of their own. [`shutdown`] drops it where the
//! process ends.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
static BUILT: AtomicUsize = AtomicUsize::new(0);
static THREAD_NAME: OnceLock<&'static str> = OnceLock::new();

/// Name of the runtime's threads unless the program names them (tests count them in /proc).
pub const DEFAULT_THREAD_NAME: &str = "git-xet";

/// Name of the server program's runtime threads.
pub const SERVER_THREAD_NAME: &str = "git-xet-server";

/// The debug event logged when the runtime is built (tests count them per process).
pub const BUILT_EVENT: &str = "git-xet: the process's async runtime is built";

/// Names the runtime's threads (`git-xet-server` for the server program), so that a look at
/// /proc tells the programs apart. Call it first thing in `main`: only the first name given
/// before the runtime is built counts.
pub fn name_threads(name: &'static str) {
    let _ = THREAD_NAME.set(name);
}

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
        .thread_name(*THREAD_NAME.get_or_init(|| DEFAULT_THREAD_NAME))
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

/// Blocks the calling thread on `future`, whose I/O is driven by tasks on the process's
/// runtime, from any thread: a plain one, a blocking one, or one of the runtime's own (whose
/// other tasks move to another thread meanwhile, so the tasks `future` waits for still run).
pub fn wait<F: Future>(future: F) -> F::Output {
    match Handle::try_current() {
        Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| futures::executor::block_on(future))
        }
        // A current-thread runtime (the ssh shell's) is not the one that drives `future`.
        _ => futures::executor::block_on(future),
    }
}

/// How many runtimes this process has built (one, or none if it never needed one).
pub fn built() -> usize {
    BUILT.load(Ordering::Relaxed)
}

/// Drops the runtime, if one was built, giving blocking work still running (a large upload
/// being registered) `grace` to finish; what is left then is cancelled. Call it where the
/// process ends, outside any runtime.
pub fn shutdown(grace: std::time::Duration) {
    let runtime = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    if let Some(runtime) = runtime {
        runtime.shutdown_timeout(grace);
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

    /// The workspace's root, two levels above this crate.
    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The client side (every crate but the server, and the `git-xet` program) builds
    /// runtimes only here.
    #[test]
    fn no_other_client_side_code_builds_a_runtime() {
        let root = root();
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
            .filter(|f| !(f.ends_with(Path::new("io/src").join(this))))
            .filter(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                text.contains(concat!("runtime::", "Builder"))
                    || text.contains(concat!("Runtime::", "new"))
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(builders.is_empty(), "runtimes built in {builders:?}");
    }

    /// The server process builds its runtime only here. The files listed run in processes
    /// of their own that never start the server or its backends (the ssh shell's git
    /// service, the pre-receive hook's requests): a current-thread runtime each.
    #[test]
    fn no_other_server_code_builds_a_runtime() {
        let own_process = ["shell/src/git.rs", "hook/src/server_call.rs"];
        let crates = root().join("crates");
        let mut files = Vec::new();
        for dir in SERVER_SIDE {
            rust_files(&crates.join(dir).join("src"), &mut files);
        }
        let mut builders = Vec::new();
        for file in files {
            let relative = file
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if own_process.contains(&relative.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for pattern in [
                "Builder::new_multi_thread",
                "Builder::new_current_thread",
                "Runtime::new(",
            ] {
                if text.contains(pattern) {
                    builders.push(format!("{relative}: {pattern}"));
                }
            }
        }
        assert!(
            builders.is_empty(),
            "runtimes built outside runtime.rs: {builders:?}"
        );
    }

    /// The crates of the server side, under `crates/`.
    const SERVER_SIDE: [&str; 8] = [
        "server",
        "storage",
        "index",
        "identity",
        "deployment",
        "hook",
        "shell",
        "upkeep",
    ];

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
