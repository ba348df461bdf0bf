//! The I/O side under the protocol core: reading files on threads to chunk and hash them,
//! the operating-system calls the upper layers need, the base every HTTP client is built
//! from, and what both programs print and log.
//!
//! It sits beside `git-xet-core` rather than in it so that the core stays pure (bytes in,
//! values out), and below both `git-xet-client` and `git-xet-server` because both hash
//! files (the upload path and the server's ingest) and both map stored bytes; neither may
//! depend on the other, so the shared code lives here.
//!
//! | module          | job                                                             |
//! |-----------------|-----------------------------------------------------------------|
//! | [`pipeline`]    | chunking and hashing files on threads                           |
//! | [`platform`]    | every platform-specific call (mmap, pipes, processes, files)    |
//! | [`http`]        | the settings every reqwest client starts from                   |
//! | [`logging`]     | tracing to stderr or `GIT_XET_LOG`; the one-line error report   |
//! | [`human`]       | sizes and ratios for people, and sizes as people write them     |
//! | [`error_chain`] | the one walk down an error's causes                             |
//! | [`url`]         | percent-decoding of remote URLs' parts                          |
//! | [`runtime`]     | the process's one tokio runtime, for both programs              |
//! | [`time`]        | the servers' clock; timestamps as RFC 3339 and for people       |
//! | `terminal`      | progress bars on stderr (feature `terminal`: the programs only) |
//! | `cli_docs`      | man pages, completions, `--help` as a man page (feature `cli-docs`) |

#[cfg(feature = "cli-docs")]
pub mod cli_docs;
pub mod error_chain;
pub mod http;
pub mod human;
pub mod json_log;
pub mod logging;
pub mod pipeline;
pub mod platform;
pub mod runtime;
#[cfg(feature = "terminal")]
pub mod terminal;
pub mod time;
pub mod url;
