//! Every platform-specific call of the crate, in one place.
//!
//! Linux gets the fast paths (splice(2), `F_SETPIPE_SZ`, `MAP_POPULATE`, early writeback with
//! sync_file_range(2)); other unixes build their fallbacks (`cfg(target_os = "linux")` picks:
//! copy through the process, the default pipe size, pages read when touched, writeback left
//! to the kernel). Calls every unix has (mmap, pread, flock, kill, umask)
//! are plain `cfg(unix)`. Extent sharing (FIDEDUPERANGE) is Linux's; elsewhere it reports
//! "not supported". Setting [`PORTABLE_ENV`] to `1` makes a Linux process take the
//! fallbacks, and read ranges with std's positioned reads instead of mapping them or calling
//! pread, so tests exercise those paths here.

pub mod extents;
pub mod file;
pub mod heap;
pub mod mmap;
pub mod pipe;
pub mod process;

use std::sync::OnceLock;

/// Environment variable that, set to `1`, makes this process use the portable fallbacks.
pub const PORTABLE_ENV: &str = "GIT_XET_PORTABLE_PLATFORM";

/// Whether [`PORTABLE_ENV`] asks for the fallbacks, read now and not logged: for calls made
/// before logging is set up, which must leave [`portable`]'s one log line to later.
fn portable_requested() -> bool {
    std::env::var_os(PORTABLE_ENV).is_some_and(|v| v == "1")
}

/// Whether the portable fallbacks are forced (read once per process).
pub fn portable() -> bool {
    static PORTABLE: OnceLock<bool> = OnceLock::new();
    *PORTABLE.get_or_init(|| {
        let forced = portable_requested();
        if forced {
            tracing::debug!("{PORTABLE_ENV}=1: taking the portable platform fallbacks");
        }
        forced
    })
}
