//! A proxy between the agents and the server for the shared-upload tests: it holds up or
//! refuses requests, notes when xorbs and shards pass, and edits the object lists the server
//! gives for the coordinator's read-ahead.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::env::GitEnv;
use crate::support::TestServer;

/// A repository `a` whose LFS traffic goes through `proxy` (git's own goes to `server`
/// directly); its remote URL.
pub(crate) fn repo_behind(
    env: &GitEnv,
    server: &TestServer,
    proxy: &ShardProxy,
    name: &str,
) -> (std::path::PathBuf, String) {
    let token = server.token(name, "write");
    let remote = format!("http://x:{token}@{}/{name}.git", server.listen_addr());
    let a = env.lfs_repo("a", &remote);
    let lfs = format!("http://x:{token}@{}/{name}.git/info/lfs", proxy.addr);
    env.git(&a, &["config", "lfs.url", &lfs]);
    (a, remote)
}

/// Forwards each request to the server on a connection of its own (`Connection: close`
/// both ways), except shard uploads, which it answers 403 (`delay` None) or forwards after
/// `delay` (requests whose line holds `delayed`: shards unless told otherwise). Notes when
/// shards and xorbs are received and answered, in order.
pub(crate) struct ShardProxy {
    pub listener: Option<TcpListener>,
    pub addr: String,
    pub refused: Arc<AtomicU64>,
    pub delay: Option<Duration>,
    pub delayed: &'static str,
    pub events: Arc<Mutex<Vec<String>>>,
    /// Answers the read-ahead route 404, as a server that keeps no Batch API answers
    /// (another process behind a balancer).
    pub forgets_batches: bool,
    /// Takes the object list out of the Batch API answers' actions, as a server that does
    /// not send it (the remote must then point at the proxy).
    pub strips_lists: bool,
    /// `<oid>:<size>` entries put first in every object list the server gives (in the Batch
    /// API answers' actions and from the read-ahead route), as a server naming objects the
    /// client did not ask about.
    pub names_also: Vec<String>,
}

impl ShardProxy {
    pub fn bind(delay: Option<Duration>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        ShardProxy {
            listener: Some(listener),
            addr,
            refused: Arc::new(AtomicU64::new(0)),
            delay,
            delayed: "/shards",
            events: Arc::default(),
            forgets_batches: false,
            strips_lists: false,
            names_also: Vec::new(),
        }
    }

    /// Forwards everything, requests whose line holds `path` after `delay`.
    pub fn delaying(path: &'static str, delay: Duration) -> Self {
        ShardProxy {
            delayed: path,
            ..ShardProxy::bind(Some(delay))
        }
    }

    /// Serves on a thread until the test process ends.
    pub fn serve(&self, upstream: String) {
        let listener = self.listener.as_ref().unwrap().try_clone().unwrap();
        let (refused, delay) = (self.refused.clone(), self.delay);
        let (delayed, events) = (self.delayed, self.events.clone());
        let (forgets_batches, strips_lists) = (self.forgets_batches, self.strips_lists);
        let names_also = Arc::new(self.names_also.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (upstream, refused) = (upstream.clone(), refused.clone());
                let (events, names_also) = (events.clone(), names_also.clone());
                std::thread::spawn(move || {
                    let hold = Hold {
                        delay,
                        delayed,
                        events: &events,
                        forgets_batches,
                        strips_lists,
                        names_also: &names_also,
                    };
                    let _ = relay(client, &upstream, &refused, &hold);
                });
            }
        });
    }
}

/// What the proxy holds up, and where it notes what passed.
struct Hold<'a> {
    delay: Option<Duration>,
    delayed: &'static str,
    events: &'a Mutex<Vec<String>>,
    forgets_batches: bool,
    strips_lists: bool,
    names_also: &'a [String],
}

fn relay(
    client: TcpStream,
    upstream: &str,
    refused: &AtomicU64,
    hold: &Hold,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if !lower.starts_with("connection:") {
            head.extend_from_slice(line.as_bytes());
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut client = client;
    let request_line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let post = request_line.starts_with("POST");
    let shard = post && request_line.contains("/shards");
    let kind = match (shard, post && request_line.contains("/xorbs/")) {
        (true, _) => Some("shard"),
        (_, true) => Some("xorb"),
        _ => None,
    };
    let note = |what: &str| {
        if let Some(kind) = kind {
            hold.events.lock().unwrap().push(format!("{kind} {what}"));
        }
    };
    note("received");
    if hold.forgets_batches && request_line.contains("/upload-batches/") {
        let msg = "no such upload batch here";
        write!(
            client,
            "HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
            msg.len()
        )?;
        return Ok(());
    }
    let held = post && request_line.contains(hold.delayed);
    if let (true, Some(delay)) = (held, hold.delay) {
        std::thread::sleep(delay);
    } else if shard && hold.delay.is_none() {
        refused.fetch_add(1, Ordering::SeqCst);
        let msg = "shards refused by the test proxy";
        write!(
            client,
            "HTTP/1.1 403 Forbidden\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
            msg.len()
        )?;
        return Ok(());
    }
    let mut server = TcpStream::connect(upstream)?;
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    server.write_all(&head)?;
    server.write_all(&body)?;
    let batch_answer = request_line.contains("/objects/batch");
    let route_answer = request_line.contains("/upload-batches/");
    let edits_lists = hold.strips_lists || !hold.names_also.is_empty();
    if edits_lists && (batch_answer || route_answer) {
        let mut answer = Vec::new();
        server.read_to_end(&mut answer)?;
        let edited = match batch_answer {
            true => json_edited(&answer, |json| edit_answer_lists(json, hold)),
            false => json_edited(&answer, |json| {
                let objects = json["objects"].as_array_mut().expect("an object list");
                for entry in hold.names_also.iter().rev() {
                    let (oid, size) = entry.split_once(':').unwrap();
                    let size: u64 = size.parse().unwrap();
                    objects.insert(0, serde_json::json!({"oid": oid, "size": size}));
                }
            }),
        };
        client.write_all(&edited)?;
    } else {
        std::io::copy(&mut server, &mut client)?;
    }
    note("answered");
    Ok(())
}

/// The object lists of a Batch API answer's upload actions taken out (`strips_lists`) or
/// with `names_also` put first.
fn edit_answer_lists(json: &mut serde_json::Value, hold: &Hold) {
    for object in json["objects"].as_array_mut().into_iter().flatten() {
        let Some(header) = object["actions"]["upload"]["header"].as_object_mut() else {
            continue;
        };
        if hold.strips_lists {
            header.remove("X-Xet-Upload-Objects");
        } else if let Some(list) = header.get_mut("X-Xet-Upload-Objects") {
            let extended = format!("{} {}", hold.names_also.join(" "), list.as_str().unwrap());
            *list = serde_json::Value::String(extended);
        }
    }
}

/// An HTTP answer (whole, `Content-Length` framed) with its JSON body edited by `edit`;
/// answers other than 200 pass as they are.
fn json_edited(answer: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8(answer[..split].to_vec()).unwrap();
    if !head.starts_with("HTTP/1.1 200") {
        return answer.to_vec();
    }
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
    let mut json: serde_json::Value = serde_json::from_slice(&answer[split..]).unwrap();
    edit(&mut json);
    let body = json.to_string();
    let mut out = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        match line.to_ascii_lowercase().starts_with("content-length:") {
            true => out.push_str(&format!("Content-Length: {}\r\n", body.len())),
            false => out.push_str(&format!("{line}\r\n")),
        }
    }
    out.push_str("\r\n");
    out.push_str(&body);
    out.into_bytes()
}
