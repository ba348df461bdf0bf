//! Small uploads of one push, shared between its agent processes.
//!
//! git-lfs hands each agent process one object at a time and waits for its answer, so
//! a push of many small files costs a dedup query, a xorb POST and a shard POST per file,
//! one file per process at a time. Here the first agent of a push that has a small object
//! to upload becomes the push's coordinator: it listens on a unix socket in a private
//! directory of `.git/xet` named after the remote, the other agents hand it their small
//! objects, and it uploads what is in flight as one session (shared xorbs, one shard).
//! Each object is answered only once that shard is registered; an object whose batch
//! failed is uploaded again on its own, so one bad file fails only itself.
//!
//! Batches overlap: while one registers (a round trip), the next gathers and packs what
//! the other agents hand over, and when none registers a batch waits for half of the idle
//! agents' objects only, so that two halves alternate instead of every agent waiting for
//! one round trip after the last object came ([`batch_target`]).
//!
//! Ahead of git-lfs, the coordinator also queues the objects a git-xet server's upload
//! answer lists that no agent has handed over yet, if the push may contain them
//! ([`read_ahead`]).
//!
//! A follower that cannot reach the coordinator, or loses it mid-object, uploads the object
//! itself (uploads are idempotent: what the dead coordinator sent is merely sent again).
//! One socket per repository and remote: objects of different repositories or remotes are
//! never mixed; within one, a batch holds objects of one CAS URL only.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::action::{XetAction, HEADER_UPLOAD_OBJECTS};
use crate::objects::{AgentEnv, ObjectService, RegisteredBatch, UploadJob};
use crate::pointer::Oid;
use crate::protocol::{read_line, Action, Line, Operation};
use batches::batch_loop;
use git_xet_client::ProgressFn;
use read_ahead::read_ahead;

mod batches;
mod read_ahead;

/// Objects up to this size go through the coordinator (bigger ones are bandwidth, not
/// round trips, and would hold up the small ones of their batch).
pub const SHARED_MAX_BYTES: u64 = 256 * 1024;
/// At most this many files per batch session.
const MAX_BATCH_FILES: usize = 512;
/// A batch is cut when no object came for this long...
const QUIET: Duration = Duration::from_millis(3);
/// ...or once it waited this long in all for more objects (packing what came meanwhile).
const MAX_GATHER: Duration = Duration::from_millis(25);
/// At most this many batches at a time: one gathering while another registers, and one
/// more of objects read ahead (see [`read_ahead`]).
const LANES: usize = 3;
/// How long `terminate` waits for batches other agents still have in flight.
const DRAIN_WAIT: Duration = Duration::from_secs(120);
/// Set to `0` to upload every object from its own agent (today's behaviour before sharing).
pub const ENV_SHARE: &str = "GIT_XET_SHARED_UPLOADS";
/// Tests only (builds with the `test-hooks` feature): the coordinator process aborts after
/// registering this many batches, before answering the last one (a coordinator killed at
/// the worst moment).
#[cfg(feature = "test-hooks")]
pub const ENV_TEST_ABORT: &str = "GIT_XET_TEST_COORDINATOR_ABORT_AFTER";

/// What one batch answers per object: `None` when registered, else why not.
type Outcome = Option<String>;

struct Pending {
    job: UploadJob,
    /// The agent waiting for it; `None` for an object read ahead (see [`read_ahead`]).
    reply: Option<mpsc::Sender<Outcome>>,
    /// Told (bytes, bytes) once the object's bytes are packed into the batch's session.
    packed: Option<ProgressFn>,
}

/// What the coordinator knows of an object of this push.
enum Seen {
    /// Pending or in a batch: these agents wait for it besides the one that handed it over.
    InFlight(Vec<mpsc::Sender<Outcome>>),
    /// Registered by a batch of this push.
    Registered,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    /// Agents that may send objects: connected followers and this process.
    agents: usize,
    /// Agents git-lfs started: followers connect only when they get their first object,
    /// so at a push's start most are not connected yet.
    expected: usize,
    /// Objects of batches being registered (their agents wait for the answer).
    registering: usize,
    /// Agents waiting on an object that another agent or the read-ahead brought
    /// ([`Seen::InFlight`]): like those of `registering`, they hand over nothing meanwhile.
    waiting: usize,
    /// Which lanes (batch clients) a batch holds, gathering or registering.
    lanes: [bool; LANES],
    /// Registered batches whose bookkeeping is not done yet.
    settling: usize,
    /// Batches registered so far (for the test hook [`ENV_TEST_ABORT`]).
    #[cfg(feature = "test-hooks")]
    registered_batches: u64,
    /// Every object handed over or read ahead, by oid.
    seen: HashMap<[u8; 32], Seen>,
    /// Batch API answers (session ids) read ahead of: `true` once with the list the answer
    /// carried, `false` while only asked for at the server.
    asked: HashMap<String, bool>,
    /// Where objects to read ahead of are sent (see [`read_ahead`]).
    ahead: Option<mpsc::Sender<UploadJob>>,
}

/// The coordinator running in this process: a batcher thread and a socket listener.
pub struct Coordinator {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    socket: PathBuf,
    /// The socket file's identity, so that only our own file is removed.
    #[cfg(unix)]
    ino: u64,
}

impl Coordinator {
    /// Uploads `job` within the next batch; returns once it is registered (`None`) or
    /// has failed (the reason). `packed` hears when its bytes are in the batch's session:
    /// git-lfs keeps every other agent idle until the first object of a push reports
    /// progress or completes, so this agent's first object must not wait for registration
    /// to say that its bytes are on their way.
    pub fn submit(&self, job: UploadJob, packed: Option<ProgressFn>) -> Outcome {
        submit(&self.shared, job, packed)
    }

    /// Stops taking new followers and waits for what is in flight.
    pub fn close(&self) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            if std::fs::metadata(&self.socket).is_ok_and(|m| m.ino() == self.ino) {
                let _ = std::fs::remove_file(&self.socket);
            }
        }
        let (lock, cv) = &*self.shared;
        let deadline = Instant::now() + DRAIN_WAIT;
        let mut q = lock.lock().expect("queue lock");
        while (!q.pending.is_empty() || q.lanes.iter().any(|b| *b) || q.settling > 0)
            && Instant::now() < deadline
        {
            q = cv
                .wait_timeout(q, Duration::from_millis(50))
                .expect("queue lock")
                .0;
        }
    }
}

fn submit(shared: &(Mutex<Queue>, Condvar), job: UploadJob, packed: Option<ProgressFn>) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let (lock, cv) = shared;
    {
        let mut q = lock.lock().expect("queue lock");
        let q = &mut *q;
        if let (Some(session), Some(ahead)) = (&job.access.session_id, &q.ahead) {
            // A git-xet server puts the answer's object list on its first objects' actions,
            // and keeps it to be asked for (it says the await limit) when another object of
            // the answer comes first. A list already asked for still goes: it is at hand,
            // and queueing is idempotent.
            let listed = job.action.header(HEADER_UPLOAD_OBJECTS).is_some();
            let asks = match q.asked.get(session) {
                None => listed || job.access.await_xorbs_limit.is_some(),
                Some(had_list) => listed && !had_list,
            };
            if asks {
                q.asked.insert(session.clone(), listed);
                let _ = ahead.send(job.clone());
            }
        }
        match q.seen.get_mut(&job.oid.0) {
            // Read ahead and registered already: nothing to wait for.
            Some(Seen::Registered) => return None,
            Some(Seen::InFlight(waiters)) => {
                waiters.push(tx);
                q.waiting += 1;
            }
            None => {
                q.seen.insert(job.oid.0, Seen::InFlight(Vec::new()));
                q.pending.push(Pending {
                    job,
                    reply: Some(tx),
                    packed,
                });
            }
        }
    }
    cv.notify_all();
    rx.recv()
        .unwrap_or_else(|_| Some("internal error (please report): the batch thread ended".into()))
}

/// How this agent uploads small objects, settled at its first one.
pub enum Role {
    Undecided,
    Coordinator(Coordinator),
    Follower(Follower),
    /// Sharing is off, unsupported, or could not be set up.
    Alone,
}

impl Role {
    /// Joins the push's coordinator for `remote`, or becomes it. `agents` is how many agents
    /// git-lfs started (its `init` says): a coordinator expects an object from each.
    pub fn settle(env: &AgentEnv, remote: &str, agents: u32) -> Role {
        if std::env::var(ENV_SHARE).is_ok_and(|v| v == "0") {
            return Role::Alone;
        }
        match elect(env, remote, agents) {
            Ok(role) => role,
            Err(e) => {
                tracing::debug!("uploading alone: cannot share uploads: {e}");
                Role::Alone
            }
        }
    }
}

/// The socket of the coordinator for `remote`: in a directory only this user can enter.
pub fn socket_path(xet_dir: &Path, remote: &str) -> PathBuf {
    // FNV-1a: stable across builds, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in remote.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    xet_dir.join("agents").join(format!("up-{h:016x}.sock"))
}

/// Joins the push's coordinator for `remote` in `xet_dir` without the agent's environment
/// (no git asked): `None` when sharing is off, nobody listens, or the socket's directory is not
/// private to this user, as the directory a coordinator makes is. Only the elected agent
/// needs the repository's environment; the caller handles `None` the usual way.
#[cfg(unix)]
pub fn follow(xet_dir: &Path, remote: &str) -> Option<Follower> {
    if std::env::var(ENV_SHARE).is_ok_and(|v| v == "0") {
        return None;
    }
    let path = socket_path(xet_dir, remote);
    let dir = std::fs::symlink_metadata(path.parent()?).ok()?;
    if !git_xet_io::platform::file::private_to_this_user(&dir) {
        return None;
    }
    let stream = std::os::unix::net::UnixStream::connect(&path).ok()?;
    Follower::new(stream).ok()
}

#[cfg(not(unix))]
pub fn follow(_xet_dir: &Path, _remote: &str) -> Option<Follower> {
    None
}

#[cfg(not(unix))]
fn elect(_env: &AgentEnv, _remote: &str, _agents: u32) -> std::io::Result<Role> {
    Ok(Role::Alone)
}

#[cfg(unix)]
fn elect(env: &AgentEnv, remote: &str, agents: u32) -> std::io::Result<Role> {
    use std::io::ErrorKind;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    use std::os::unix::net::{UnixListener, UnixStream};
    let path = socket_path(&env.xet_dir, remote);
    let dir = path.parent().expect("socket path has a parent");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) if e.kind() == ErrorKind::AddrInUse => match UnixStream::connect(&path) {
            Ok(stream) => return Ok(Role::Follower(Follower::new(stream)?)),
            Err(_) => {
                // A coordinator that died left its socket.
                std::fs::remove_file(&path)?;
                UnixListener::bind(&path)?
            }
        },
        Err(e) => return Err(e),
    };
    let ino = std::fs::metadata(&path)?.ino();
    let (ahead_tx, ahead_rx) = mpsc::channel::<UploadJob>();
    let shared = Arc::new((
        Mutex::new(Queue {
            agents: 1,
            expected: agents as usize,
            ahead: Some(ahead_tx),
            ..Queue::default()
        }),
        Condvar::new(),
    ));
    let reader = shared.clone();
    let reading_service = ObjectService::new(env.clone());
    std::thread::Builder::new()
        .name("xet-read-ahead".into())
        .spawn(move || read_ahead(&reader, reading_service, ahead_rx))?;
    let service = ObjectService::new(env.clone());
    let (settle_tx, settle_rx) = mpsc::channel::<RegisteredBatch>();
    let settler = shared.clone();
    std::thread::Builder::new()
        .name("xet-settle".into())
        .spawn(move || {
            for registered in settle_rx {
                registered.settle();
                let (lock, cv) = &*settler;
                lock.lock().expect("queue lock").settling -= 1;
                cv.notify_all();
            }
        })?;
    let batcher = shared.clone();
    std::thread::Builder::new()
        .name("xet-batcher".into())
        .spawn(move || batch_loop(&batcher, service, &settle_tx))?;
    let accepting = shared.clone();
    std::thread::Builder::new()
        .name("xet-coordinator".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = accepting.clone();
                let _ = std::thread::Builder::new()
                    .name("xet-follower".into())
                    .spawn(move || serve_follower(stream, &shared));
            }
        })?;
    tracing::debug!(socket = %path.display(), "coordinating this push's small uploads");
    Ok(Role::Coordinator(Coordinator {
        shared,
        socket: path,
        ino,
    }))
}

/// One request on the socket: an object and the action git-lfs gave for it (with its
/// token: the socket's directory is the user's alone, and nothing here logs it).
#[derive(serde::Serialize, serde::Deserialize)]
struct WireRequest {
    oid: String,
    size: u64,
    path: PathBuf,
    href: String,
    header: BTreeMap<String, String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct WireAnswer {
    error: Option<String>,
}

impl WireRequest {
    fn into_job(self) -> Result<UploadJob, String> {
        let oid = hex32(&self.oid).ok_or("bad oid from an agent")?;
        let action = Action {
            href: self.href,
            header: self.header,
        };
        let access =
            XetAction::from_action(Some(&action), Operation::Upload).map_err(|e| e.to_string())?;
        Ok(UploadJob {
            oid: Oid(oid),
            size: self.size,
            path: self.path,
            access,
            action,
        })
    }
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(unix)]
fn serve_follower(stream: std::os::unix::net::UnixStream, shared: &(Mutex<Queue>, Condvar)) {
    let (lock, cv) = shared;
    lock.lock().expect("queue lock").agents += 1;
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    while let Ok(Line::Text(line)) = read_line(&mut reader) {
        let error = match serde_json::from_str::<WireRequest>(&line) {
            Ok(req) => match req.into_job() {
                Ok(job) => submit(shared, job, None),
                Err(e) => Some(e),
            },
            Err(e) => Some(format!("malformed request from an agent: {e}")),
        };
        let mut answer = serde_json::to_string(&WireAnswer { error }).expect("serializes");
        answer.push('\n');
        if writer.write_all(answer.as_bytes()).is_err() {
            break;
        }
    }
    lock.lock().expect("queue lock").agents -= 1;
    cv.notify_all();
}

/// An agent's connection to the push's coordinator.
pub struct Follower {
    #[cfg(unix)]
    reader: BufReader<std::os::unix::net::UnixStream>,
    #[cfg(unix)]
    writer: std::os::unix::net::UnixStream,
}

impl Follower {
    #[cfg(unix)]
    fn new(stream: std::os::unix::net::UnixStream) -> std::io::Result<Follower> {
        Ok(Follower {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Has the coordinator upload `job`: `Ok` with its verdict, `Err` when the coordinator
    /// could not be reached or went away before answering (the caller uploads it itself).
    #[cfg(unix)]
    pub fn upload(&mut self, job: &UploadJob) -> std::io::Result<Outcome> {
        let req = WireRequest {
            oid: job.oid.to_hex(),
            size: job.size,
            path: job.path.clone(),
            href: job.action.href.clone(),
            header: job.action.header.clone(),
        };
        let mut line = serde_json::to_string(&req).map_err(std::io::Error::other)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        match read_line(&mut self.reader)? {
            Line::Text(t) => serde_json::from_str::<WireAnswer>(&t)
                .map(|a| a.error)
                .map_err(std::io::Error::other),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the coordinating agent went away",
            )),
        }
    }

    #[cfg(not(unix))]
    pub fn upload(&mut self, _job: &UploadJob) -> std::io::Result<Outcome> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names_differ_by_remote_and_stay_short() {
        let a = socket_path(Path::new("/r/.git/xet"), "origin");
        let b = socket_path(Path::new("/r/.git/xet"), "upstream");
        assert_ne!(a, b);
        assert_eq!(a, socket_path(Path::new("/r/.git/xet"), "origin"));
        assert!(a.starts_with("/r/.git/xet/agents"));
        assert!(a.file_name().unwrap().len() < 30);
    }

    #[test]
    fn oids_from_the_socket_are_checked() {
        assert_eq!(hex32(&"ab".repeat(32)), Some([0xab; 32]));
        for bad in ["", "ab", &"zz".repeat(32), &"é".repeat(32)] {
            assert_eq!(hex32(bad), None, "{bad:?}");
        }
    }
}
