//! The ssh shell's relay (`git xet shell` serving git-lfs-transfer) to its own server on
//! loopback, run without sshd: sshd only starts it with the client's command.

use std::io::Write;
use std::process::Stdio;

use crate::support::{git_xet, TestServer};

/// git-lfs-transfer's packets: `FLUSH` for a flush packet.
fn packets(items: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for item in items {
        match *item {
            "FLUSH" => out.extend_from_slice(b"0000"),
            data => {
                write!(out, "{:04x}{data}", data.len() + 4).unwrap();
            }
        }
    }
    out
}

/// The packets of an answer stream, as text, `FLUSH` for a flush.
fn read_packets(mut bytes: &[u8]) -> Vec<String> {
    let mut items = Vec::new();
    while bytes.len() >= 4 {
        let len = usize::from_str_radix(std::str::from_utf8(&bytes[..4]).unwrap(), 16).unwrap();
        let len = len.min(bytes.len()); // a stream cut short shows as a short last packet
        if len < 4 {
            items.push(if len == 0 { "FLUSH" } else { "DELIM" }.to_string());
            bytes = &bytes[4..];
            continue;
        }
        items.push(
            String::from_utf8_lossy(&bytes[4..len])
                .trim_end()
                .to_string(),
        );
        bytes = &bytes[len..];
    }
    items
}

/// A proxy in the environment (sshd may pass one on) does not catch the relay's requests to
/// its own server on loopback: here every proxy variable points at a closed port, and a
/// lock is still taken through the server's locking API.
#[test]
fn the_relay_to_its_own_server_ignores_proxies_in_the_environment() {
    let server = TestServer::start();
    let closed = crate::support::ports::ClosedPort::bind();
    let proxy = closed.url();
    let mut child = git_xet()
        .args([
            "shell",
            "--user",
            "alice",
            "--repo",
            "org/raw:write",
            "--data",
        ])
        .arg(&server.data)
        .env("SSH_ORIGINAL_COMMAND", "git-lfs-transfer org/raw upload")
        .env("http_proxy", &proxy)
        .env("HTTP_PROXY", &proxy)
        .env("https_proxy", &proxy)
        .env("HTTPS_PROXY", &proxy)
        .env("ALL_PROXY", &proxy)
        .env("all_proxy", &proxy)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = packets(&[
        "version 1\n",
        "FLUSH",
        "lock\n",
        "path=a.psd\n",
        "FLUSH",
        "quit\n",
        "FLUSH",
    ]);
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let answer = read_packets(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        answer.iter().any(|a| a == "status 201"),
        "lock taken: {answer:?} {stderr}"
    );
    assert!(answer.iter().any(|a| a == "ownername=alice"), "{answer:?}");
    assert!(out.status.success(), "{stderr}");
}
