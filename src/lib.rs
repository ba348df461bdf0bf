//! git-xet: the XET content-addressed storage protocol for git, as a git-lfs custom
//! transfer agent and the server it talks to.
//!
//! Layers, each depending only on those below it:
//!
//! | module     | job                                                                      |
//! |------------|--------------------------------------------------------------------------|
//! | [`cli`]    | argument parsing and output; each command calls into a layer below        |
//! | [`git`]    | git integration: install, credentials, migrate, status, hooks            |
//! | [`lfs`]    | git-lfs custom transfer protocol and pointer files; drives the client    |
//! | [`server`] | HTTP server: CAS API, LFS Batch API, git smart HTTP; storage and index   |
//! | [`client`] | CAS client: HTTP, retries, tokens; upload with dedup; download; caches    |
//! | [`xet`]    | protocol core: chunker, hashes, xorbs, shards; pure, no I/O or network    |
//!
//! `client` and `server` share only the protocol core, never each other.

pub mod cli;
pub mod client;
pub mod git;
pub mod lfs;
pub mod server;
pub mod xet;
