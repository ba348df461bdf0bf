//! The client engine against the real `git xet server` on loopback.

mod support;

#[path = "client/cli.rs"]
mod cli;
#[path = "client/common.rs"]
mod common;
#[path = "client/core_cmds.rs"]
mod core_cmds;
#[path = "client/dedup.rs"]
mod dedup;
#[path = "client/faults.rs"]
mod faults;
#[path = "client/proxy.rs"]
mod proxy;
#[path = "client/retry.rs"]
mod retry;
#[path = "client/roundtrip.rs"]
mod roundtrip;
#[path = "client/tap.rs"]
mod tap;
