//! The HTTP API's wire vocabulary, named once for the server and its clients: the JSON of the
//! CAS API's answers ([`cas`]), of git-lfs's locking API ([`locks`]), and every route's path
//! ([`routes`]). Serde only: the HTTP client and server crates stay out of the core, so the
//! same types serve axum handlers, reqwest clients and the ssh shell's relay.
//!
//! Field names and order are the deployed ones (hf-xet, git-lfs); `tests.rs` pins them
//! against literal JSON.

pub mod cas;
pub mod locks;
pub mod routes;

/// The reconstruction answers, defined where their terms are (one definition for both sides).
pub use crate::reconstruction::{Reconstruction, ReconstructionV2};

#[cfg(test)]
mod tests;
