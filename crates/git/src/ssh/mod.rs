//! ssh remotes, as git-lfs handles them: the LFS server's address and authorization come
//! from `git-lfs-authenticate` run over ssh.
//!
//! | module           | job                                                          |
//! |------------------|--------------------------------------------------------------|
//! | [`url`]          | which remote URLs are ssh; destination, port and path        |
//! | [`command`]      | the ssh command line (program, variant, port flag, quoting)  |
//! | [`authenticate`] | running `git-lfs-authenticate`, its answer, and the cache    |

pub mod authenticate;
pub mod command;
pub mod url;

pub use authenticate::{SshAuth, SshFailure};
pub use command::SshSettings;
pub use url::SshRemote;

use crate::config::Config;
use crate::GitError;

/// `git-lfs-authenticate` for `remote` (configured as `url`) and `operation`
/// (`upload`/`download`), asked once per process while its answer is good.
pub fn authenticate(
    config: &Config,
    url: &str,
    remote: &SshRemote,
    operation: &str,
) -> Result<SshAuth, GitError> {
    // As git-lfs: any `sshtransfer` other than `negotiate`/`never` means the pure ssh
    // protocol only (exact URL key, then the global one; git's URL matching is not done).
    let mode = [
        format!("lfs.{url}.sshtransfer"),
        "lfs.sshtransfer".to_string(),
    ]
    .iter()
    .find_map(|k| config.get(None, k).ok().flatten());
    if let Some(mode) = mode.filter(|m| m != "negotiate" && m != "never") {
        return Err(GitError::SshAuthenticate {
            destination: remote.display_host(),
            kind: SshFailure::Disabled,
            detail: format!("lfs.sshtransfer is {mode:?}"),
        });
    }
    authenticate::cache().get_or(remote, operation, || {
        let get = |key: &str| config.get(None, key).ok().flatten();
        let settings = SshSettings::from_env(get);
        let ttl = get("lfs.defaulttokenttl").and_then(|v| v.trim().parse().ok());
        authenticate::run(&settings, remote, operation, ttl)
    })
}
