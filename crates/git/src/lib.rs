//! git integration: repository discovery, git config (install/uninstall), credentials,
//! migration of LFS repositories, status, the filter and the transfer agent's process.
//!
//! Everything goes through the `git` command line, which is the authority on config
//! scopes, includes, credential helpers and repository layout.
//!
//! | module          | job                                                           |
//! |-----------------|---------------------------------------------------------------|
//! | [`command`]     | running `git` / `git lfs` as child processes                 |
//! | [`config`]      | `git config` at an explicit scope                             |
//! | [`repo`]        | repository discovery; LFS and XET paths; remotes and endpoints |
//! | [`credentials`] | `git credential fill`/`approve`/`reject`                      |
//! | [`http`]        | git's HTTP settings and credentials for the client's requests |
//! | [`ssh`]         | ssh remotes: `git-lfs-authenticate` as git-lfs runs it        |
//! | [`url_alias`]   | `url.<base>.insteadOf`/`pushInsteadOf` as git-lfs applies them |
//! | [`endpoint`]    | a remote's Batch API endpoint, its headers and the way it authenticates |
//! | [`install`]     | registering the transfer agent, and taking it back            |
//! | [`filter`]      | `git xet filter-process`: clean/smudge for `filter=lfs` files |
//! | `git_index`     | git's index file read without git (the filter's re-cleans)    |
//! | [`transfer`]    | `git xet transfer`: the agent process git-lfs starts          |
//! | [`objects`]     | the object service's environment (store, credentials, HTTP) |
//! | [`outgoing`]    | what a push may contain (the upload coordinator's read-ahead) |

pub mod command;
pub mod config;
pub mod credentials;
pub mod endpoint;
mod error;
pub mod filter;
mod git_index;
pub mod http;
pub mod install;
pub mod lfs_objects;
pub mod migrate;
pub mod objects;
pub mod outgoing;
pub mod quickstart;
pub mod repo;
pub mod ssh;
pub mod status;
pub mod store;
pub mod transfer;
pub mod url_alias;

pub use error::GitError;
