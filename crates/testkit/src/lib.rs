//! What the workspace's tests share that is not a test itself: real helper programs started on
//! loopback for a test and stopped when it ends. Never a dependency of a shipped crate.
//!
//! - [`ports`]: loopback ports for programs that cannot bind port 0 and report their port.
//! - [`postgres`]: a real PostgreSQL cluster per test process, a database per test.

pub mod ports;
pub mod postgres;
