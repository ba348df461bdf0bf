//! git-xet: the XET content-addressed storage protocol for git, as a git-lfs custom
//! transfer agent and the server it talks to.
//!
//! Layers, each depending only on those below it:
//!
//! | module     | job                                                                      |
//! |------------|--------------------------------------------------------------------------|
//! | [`cli`]    | argument parsing and output; each command calls into a layer below        |
//! | [`git`]    | git integration; mostly the filter-process (clean/smudge of LFS files);  |
//! |            | also install, config and credentials, migrate, status, quickstart, the   |
//! |            | transfer agent's process, the pre-receive check                          |
//! | [`lfs`]    | git-lfs custom transfer protocol and agent, pointer files, the Batch API |
//! |            | client, and the object service that moves LFS objects through XET        |
//! | [`server`] | HTTP server: CAS API, LFS Batch API, git smart HTTP, git over ssh;       |
//! |            | storage (disk, S3) and index (SQLite, PostgreSQL) behind traits          |
//! | [`client`] | CAS client: HTTP (the client factory), retries, tokens; upload with      |
//! |            | dedup; download; caches                                                  |
//! | [`io`]     | I/O under the core, shared by client and server: the chunk-and-hash      |
//! |            | `pipeline` (files, threads), `platform`, every platform-specific call    |
//! |            | with a portable fallback, and `http`, the base of every HTTP client      |
//! | [`xet`]    | protocol core, pure: chunker, hashes, xorbs, shards; no files, threads,  |
//! |            | libc or network                                                          |
//!
//! `client` and `server` share only `io` and the protocol core, never each other.

pub mod cli;
pub mod client;
pub mod git;
pub mod io;
pub mod lfs;
pub mod server;
pub mod xet;
