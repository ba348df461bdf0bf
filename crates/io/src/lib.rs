//! The I/O side under the protocol core: reading files on threads to chunk and hash them,
//! the operating-system calls the upper layers need, the base every HTTP client is built
//! from, and what both programs print.
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
//! | [`human`]       | sizes and ratios for people, and sizes as people write them     |
//! | [`error_chain`] | the one walk down an error's causes                             |
//! | [`url`]         | percent-decoding of remote URLs' parts                          |
//! | [`runtime`]     | the process's one tokio runtime, for both programs              |
//! | [`time`]        | the servers' clock; timestamps as RFC 3339 and for people       |

pub mod error_chain;
pub mod http;
pub mod human;
pub mod pipeline;
pub mod platform;
pub mod runtime;
#[cfg(feature = "test-hooks")]
pub mod test_pause;
pub mod time;
pub mod url;
