//! A small fault-injecting TCP proxy for HTTP/1.1, in front of the real server. Each new
//! connection takes the next fault from a queue (or passes through when it is empty):
//! answer 500, drop the connection, or cut the response after some bytes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Reads the request head and answers `500 Internal Server Error`.
    Status500,
    /// Reads the request head and closes the connection without answering.
    Drop,
    /// Forwards the request, then only the first `n` bytes of the response.
    Truncate(usize),
    /// Forwards everything, but holds the response back for this many milliseconds.
    Delay(u64),
    /// Forwards the request, then answers `200 OK` with this body in place of the server's
    /// answer (a proxy's or portal's page).
    Replace(&'static str),
}

#[derive(Default)]
pub struct Counters {
    pub connections: AtomicUsize,
    pub faults: AtomicUsize,
}

pub struct FaultProxy {
    pub url: String,
    pub counters: Arc<Counters>,
    faults: Arc<Mutex<VecDeque<Fault>>>,
    upstream: Arc<Mutex<Option<SocketAddr>>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl FaultProxy {
    /// Binds a loopback port (set the upstream before sending traffic). Runs on a thread of
    /// its own with its own runtime, so it works from any test.
    pub fn start() -> Self {
        let counters = Arc::new(Counters::default());
        let faults = Arc::new(Mutex::new(VecDeque::new()));
        let upstream = Arc::new(Mutex::new(None));
        let (c, f, u) = (counters.clone(), faults.clone(), upstream.clone());
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                let accept = async {
                    while let Ok((client, _)) = listener.accept().await {
                        c.connections.fetch_add(1, Ordering::SeqCst);
                        let fault = f.lock().unwrap().pop_front();
                        if fault.is_some() {
                            c.faults.fetch_add(1, Ordering::SeqCst);
                        }
                        let target = u.lock().unwrap().expect("upstream set");
                        tokio::spawn(serve(client, target, fault));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stop => {}
                }
            });
        });
        let addr = addr_rx.recv().unwrap();
        FaultProxy {
            url: format!("http://{addr}"),
            counters,
            faults,
            upstream,
            shutdown: Some(shutdown),
        }
    }

    pub fn set_upstream(&self, url: &str) {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap();
        *self.upstream.lock().unwrap() = Some(addr);
    }

    /// Queues faults for the next connections.
    pub fn inject(&self, faults: impl IntoIterator<Item = Fault>) {
        self.faults.lock().unwrap().extend(faults);
    }

    pub fn faults_left(&self) -> usize {
        self.faults.lock().unwrap().len()
    }
}

async fn read_head(client: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
        match client.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    head
}

/// Connects upstream and copies the client's requests there in the background; returns
/// the upstream's read half and the client's write half, for the caller to pass (or
/// spoil) the answers, and the background task.
async fn forward_requests(
    client: TcpStream,
    target: SocketAddr,
) -> Option<(OwnedReadHalf, OwnedWriteHalf, tokio::task::JoinHandle<()>)> {
    let upstream = TcpStream::connect(target).await.ok()?;
    let (ur, mut uw) = upstream.into_split();
    let (mut cr, cw) = client.into_split();
    let up = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut cr, &mut uw).await;
    });
    Some((ur, cw, up))
}

async fn serve(mut client: TcpStream, target: SocketAddr, fault: Option<Fault>) {
    match fault {
        Some(Fault::Status500) => {
            read_head(&mut client).await;
            let _ = client
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 14\r\nconnection: close\r\n\r\ninjected fault")
                .await;
            let _ = client.shutdown().await;
        }
        Some(Fault::Drop) => {
            read_head(&mut client).await;
            drop(client);
        }
        Some(Fault::Truncate(n)) => {
            let Some((mut ur, mut cw, up)) = forward_requests(client, target).await else {
                return;
            };
            let mut sent = 0usize;
            let mut buf = vec![0u8; 16384];
            while sent < n {
                let want = buf.len().min(n - sent);
                match ur.read(&mut buf[..want]).await {
                    Ok(0) | Err(_) => break,
                    Ok(k) => {
                        if cw.write_all(&buf[..k]).await.is_err() {
                            break;
                        }
                        sent += k;
                    }
                }
            }
            up.abort();
            let _ = cw.shutdown().await;
        }
        Some(Fault::Delay(ms)) => {
            let Some((mut ur, mut cw, up)) = forward_requests(client, target).await else {
                return;
            };
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            let _ = tokio::io::copy(&mut ur, &mut cw).await;
            up.abort();
        }
        Some(Fault::Replace(body)) => {
            let Some((mut ur, mut cw, up)) = forward_requests(client, target).await else {
                return;
            };
            // The server's answer is read (so the request was served), then replaced.
            let mut buf = [0u8; 4096];
            let _ = ur.read(&mut buf).await;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = cw.write_all(answer.as_bytes()).await;
            up.abort();
            let _ = cw.shutdown().await;
        }
        None => {
            let Ok(mut upstream) = TcpStream::connect(target).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
    }
}
