//! The server process's one tokio runtime (as the client side's `git_xet_client::runtime`):
//! built on first use, once. The server's CLI runs the server and the upkeep commands on it,
//! and the backends that drive I/O of their own (the PostgreSQL pool's connections, the S3
//! probe) spawn onto it instead of building runtimes of their own.

use std::future::Future;
use std::sync::Mutex;

use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

/// Name of the runtime's threads (tests count them in /proc).
pub const THREAD_NAME: &str = "git-xet-server";

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
        .thread_name(THREAD_NAME)
        .build()?;
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

/// Drops the runtime, if one was built, giving blocking work still running (a large upload
/// being registered) `grace` to finish. Call it where the process ends, outside any runtime.
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

    /// The server process builds its runtime only here. The files listed run in processes
    /// of their own that never start the server or its backends (the ssh shell's git
    /// service, the pre-receive hook's requests): a current-thread runtime each.
    #[test]
    fn no_other_server_code_builds_a_runtime() {
        let own_process = ["ssh/git.rs", "hook/server_call.rs"];
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut builders = Vec::new();
        for file in files {
            let relative = file
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if relative == "runtime.rs" || own_process.contains(&relative.as_str()) {
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
}
