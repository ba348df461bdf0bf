//! The one retry policy, as the CAS client and the Batch API client live it: against a small
//! HTTP peer on loopback that answers each request with the next status of a script, they
//! retry 503 after the `Retry-After` it gives and never retry 501 or 507.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use git_xet_client::transport::Authenticator;
use git_xet_client::{CasClient, ClientConfig, ClientError, HttpFactory, RetryPolicy, Token};
use git_xet_core::lfs::pointer::Oid;
use git_xet_core::MerkleHash;
use git_xet_lfs::batch::{BatchClient, Endpoint};
use git_xet_lfs::protocol::Operation;
use git_xet_lfs::LfsError;

/// One scripted answer: status, extra header lines, body.
type Answer = (u16, &'static str, &'static str);

/// An HTTP/1.1 peer on 127.0.0.1 answering the n-th request with the n-th answer of its
/// script (the last one again once the script is used up), one request per connection. It
/// notes when each request arrived, and stops when dropped.
struct ScriptedPeer {
    url: String,
    arrivals: Arc<Mutex<Vec<Instant>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedPeer {
    fn start(script: Vec<Answer>) -> ScriptedPeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopping) = (arrivals.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                if read_request(&stream).is_none() {
                    continue;
                }
                seen.lock().unwrap().push(Instant::now());
                let (status, headers, body) = script[n.min(script.len() - 1)];
                let _ = write!(
                    &stream,
                    "HTTP/1.1 {status} Scripted\r\n{headers}Content-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        ScriptedPeer {
            url,
            arrivals,
            stop,
            thread: Some(thread),
        }
    }

    fn arrivals(&self) -> Vec<Instant> {
        self.arrivals.lock().unwrap().clone()
    }
}

impl Drop for ScriptedPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request (head and `Content-Length` body); `None` if the peer hung up.
fn read_request(stream: &TcpStream) -> Option<()> {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    Some(())
}

/// Quick backoff, so that only a `Retry-After` makes a test wait.
fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(2),
        max_elapsed: Duration::from_secs(10),
    }
}

fn cas_client(peer: &ScriptedPeer) -> CasClient {
    let mut config = ClientConfig::new(peer.url.clone());
    config.token = Some(Token::new("secret", None));
    config.retry = policy();
    CasClient::new(config).unwrap()
}

fn batch_client(peer: &ScriptedPeer) -> BatchClient {
    let endpoint = Endpoint::new(&format!("{}/org/repo.git/info/lfs", peer.url));
    BatchClient::new(
        endpoint,
        &HttpFactory::default(),
        Arc::new(Authenticator::anonymous()),
    )
    .unwrap()
    .with_retry(policy())
}

fn batch(peer: &ScriptedPeer) -> Result<usize, LfsError> {
    let client = batch_client(peer);
    let object = [(Oid([7; 32]), 10)];
    git_xet_io::runtime::block_on(client.batch(Operation::Download, &["basic"], &object))
        .unwrap()
        .map(|answer| answer.objects.len())
}

fn query(peer: &ScriptedPeer) -> Result<Option<bytes::Bytes>, ClientError> {
    let client = cas_client(peer);
    git_xet_io::runtime::block_on(client.api().query_chunk(&MerkleHash::default())).unwrap()
}

/// The time between the first two requests.
fn first_gap(peer: &ScriptedPeer) -> Duration {
    let arrivals = peer.arrivals();
    arrivals[1] - arrivals[0]
}

const RETRY_AFTER_1S: Answer = (503, "Retry-After: 1\r\n", "busy");
const NOT_FOUND: Answer = (404, "", "{\"message\": \"no such thing\"}");
const BATCH_OK: Answer = (200, "", "{\"transfer\": \"basic\", \"objects\": []}");

#[test]
fn the_cas_client_waits_as_long_as_a_503s_retry_after_says() {
    let peer = ScriptedPeer::start(vec![RETRY_AFTER_1S, NOT_FOUND]);
    let started = Instant::now();
    assert!(query(&peer).unwrap().is_none(), "the 404 answers the query");
    assert_eq!(peer.arrivals().len(), 2);
    let gap = first_gap(&peer);
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn the_batch_client_waits_as_long_as_a_503s_retry_after_says() {
    let peer = ScriptedPeer::start(vec![RETRY_AFTER_1S, BATCH_OK]);
    assert_eq!(batch(&peer).unwrap(), 0);
    assert_eq!(peer.arrivals().len(), 2);
    let gap = first_gap(&peer);
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
}

/// A full disk (507) and an unimplemented method (501) do not go away by asking again:
/// one request each, and the status in the error.
#[test]
fn neither_client_retries_507_or_501() {
    for status in [507, 501] {
        let peer = ScriptedPeer::start(vec![(status, "Retry-After: 0\r\n", "no"), BATCH_OK]);
        match batch(&peer) {
            Err(LfsError::Status(s)) => assert_eq!(s.status, status),
            other => panic!("batch, {status}: {other:?}"),
        }
        assert_eq!(peer.arrivals().len(), 1, "batch, {status}");

        let peer = ScriptedPeer::start(vec![(status, "Retry-After: 0\r\n", "no"), NOT_FOUND]);
        match query(&peer) {
            Err(ClientError::Http { status: s, .. }) => assert_eq!(s, status),
            other => panic!("CAS, {status}: {other:?}"),
        }
        assert_eq!(peer.arrivals().len(), 1, "CAS, {status}");
    }
}

/// Transient statuses without a hint are retried with quick backoff up to the policy's
/// attempts, then the last status is the error.
#[test]
fn both_clients_retry_transient_statuses_a_bounded_number_of_times() {
    let peer = ScriptedPeer::start(vec![(502, "", ""), (429, "", ""), BATCH_OK]);
    assert_eq!(batch(&peer).unwrap(), 0);
    assert_eq!(peer.arrivals().len(), 3);

    let peer = ScriptedPeer::start(vec![(500, "", "")]);
    match batch(&peer) {
        Err(LfsError::Status(s)) => assert_eq!(s.status, 500),
        other => panic!("batch: {other:?}"),
    }
    assert_eq!(peer.arrivals().len(), policy().max_attempts as usize);

    let peer = ScriptedPeer::start(vec![(504, "", "")]);
    match query(&peer) {
        Err(ClientError::RetriesExhausted { attempts, .. }) => {
            assert_eq!(attempts, policy().max_attempts)
        }
        other => panic!("CAS: {other:?}"),
    }
    assert_eq!(peer.arrivals().len(), policy().max_attempts as usize);
}
