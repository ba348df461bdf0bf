//! The I/O side under the protocol core: reading files on threads to chunk and hash them,
//! the operating-system calls the upper layers need, and the base every HTTP client is
//! built from ([`http`]).
//!
//! It sits beside [`crate::xet`] rather than in it so that the core stays pure (bytes in,
//! values out), and below both [`crate::client`] and [`crate::server`] because both hash
//! files (the upload path and the server's ingest) and both map stored bytes; neither may
//! import the other, so the shared code lives here.

pub mod http;
pub mod pipeline;
pub mod platform;
