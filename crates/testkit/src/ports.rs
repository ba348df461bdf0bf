//! Loopback ports for programs that cannot bind port 0 and say which port they got (sshd,
//! PostgreSQL, Garage, nginx), and ports on which nothing listens.
//!
//! A port from binding port 0 and closing the socket is back in the kernel's ephemeral
//! pool at once: any other process's port-0 bind or outgoing connection may take it before
//! the program binds it. So a candidate comes from below that range, where the kernel never
//! hands ports out, is seen free now, and is never given twice by this process. Another
//! test binary can still pick the same one: start the program and, when it could not bind,
//! ask for another ([`start_on_a_free_port`]).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Mutex;

/// How many ports [`start_on_a_free_port`] tries.
pub const ATTEMPTS: usize = 5;

/// A loopback port that is free now, below the kernel's ephemeral range.
pub fn candidate() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let low = ephemeral_low().clamp(10_001, 32_768);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let port = rand::random::<u16>() % (low - 10_000) + 10_000;
        if !given.contains(&port) && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port between 10000 and {low}");
}

/// `n` distinct candidates.
pub fn candidates(n: usize) -> Vec<u16> {
    (0..n).map(|_| candidate()).collect()
}

/// The first port of the kernel's ephemeral range (Linux default 32768).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// Runs `start` on candidate ports until it returns `Ok`; `Err` (why) means the program
/// did not come up on that port (typically: another process took it first). Panics with
/// every reason after [`ATTEMPTS`] ports.
pub fn start_on_a_free_port<T>(what: &str, mut start: impl FnMut(u16) -> Result<T, String>) -> T {
    let mut failures = Vec::new();
    for _ in 0..ATTEMPTS {
        let port = candidate();
        match start(port) {
            Ok(started) => return started,
            Err(why) => {
                eprintln!("{what} did not start on port {port}: {why}");
                failures.push(format!("port {port}: {why}"));
            }
        }
    }
    panic!(
        "{what} did not start on {ATTEMPTS} ports:\n{}",
        failures.join("\n")
    );
}

/// A loopback port bound by this process but not listening: a connection to it is refused,
/// and no other process can listen there while this value lives.
pub struct ClosedPort {
    socket: tokio::net::TcpSocket,
}

impl ClosedPort {
    pub fn bind() -> ClosedPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .expect("bind a loopback port");
        ClosedPort { socket }
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().expect("bound address").port()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }
}
