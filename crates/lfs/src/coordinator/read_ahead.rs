//! The coordinator's read-ahead of git-lfs: from the object list a git-xet server gives with
//! each upload Batch API answer, the objects no agent has handed over yet are queued from the
//! repository's object store, as if their agents had. The server's list only says which
//! objects to look for: an object is read ahead only if the push may contain it (the git
//! layer's rule, [`AgentEnv::outgoing`]), so that a server naming a local object it has no
//! business with (known from a public pointer, say) never gets its bytes.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{hex32, Pending, Queue, Seen, SHARED_MAX_BYTES};
use crate::action::HEADER_UPLOAD_OBJECTS;
use crate::objects::{AgentEnv, ObjectService, PushContents, UploadJob};
use crate::pointer::Oid;
use crate::store::LfsStore;
use git_xet_core::api::cas::AnnouncedObject;
use git_xet_core::lfs::parse_upload_objects;

/// How long the read-ahead waits for an answer's list to come with one of its first objects
/// when another object of the answer came first (asking the server costs a round trip).
const LIST_GRACE: Duration = Duration::from_millis(10);

/// Reads ahead of git-lfs, on a thread of its own: for the first object of each Batch API
/// answer (session id), learns which objects that answer announced (a git-xet extension: the
/// list its first objects' actions carry, [`HEADER_UPLOAD_OBJECTS`], else asked for at the
/// server) and queues those the push may contain and no agent has handed over yet, from this
/// repository's object store, as if their agents had handed them over. git-lfs hands each
/// agent one object at a time and waits for its answer, so the objects it hands over next are
/// then registered already, or on their way. Objects the push may not contain, or that the
/// store lacks or holds with another size, are left to their agents (git-lfs hands over
/// those the push does contain); nothing is answered to git-lfs before its registration, as
/// for any object.
pub(super) fn read_ahead(
    shared: &(Mutex<Queue>, Condvar),
    mut service: ObjectService,
    asks: mpsc::Receiver<UploadJob>,
) {
    let (lock, cv) = shared;
    // Asks not taken yet, and the answers whose list came with an object.
    let mut backlog: Vec<UploadJob> = Vec::new();
    let mut listed: HashSet<String> = HashSet::new();
    // Answers whose list was waited for (once each).
    let mut graced: HashSet<String> = HashSet::new();
    // What the push may contain, worked out at the first list (once per push).
    let mut outgoing: Option<Box<dyn PushContents>> = None;
    loop {
        if backlog.is_empty() {
            match asks.recv() {
                Ok(ask) => backlog.push(ask),
                Err(_) => return,
            }
        }
        backlog.extend(asks.try_iter());
        // A list at hand goes first: it may make an ask at the server moot.
        let next = backlog
            .iter()
            .position(|ask| ask.action.header(HEADER_UPLOAD_OBJECTS).is_some())
            .unwrap_or(0);
        let first = backlog.remove(next);
        let carried = first.action.header(HEADER_UPLOAD_OBJECTS);
        let session = first.access.session_id.clone().unwrap_or_default();
        if carried.is_some() {
            listed.insert(session);
        } else if listed.contains(&session) {
            continue;
        } else if !listed.is_empty() && graced.insert(session.clone()) {
            // This server sends lists: the answer's is on its first objects, which git-lfs
            // handed out first, so one of them is likely a moment behind (agents race to the
            // socket). Waiting a little for it is cheaper than asking.
            let deadline = Instant::now() + LIST_GRACE;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                let Ok(ask) = asks.recv_timeout(left) else {
                    break;
                };
                let brings_it = ask.access.session_id.as_ref() == Some(&session)
                    && ask.action.header(HEADER_UPLOAD_OBJECTS).is_some();
                backlog.push(ask);
                if brings_it {
                    break;
                }
            }
            backlog.push(first);
            continue;
        }
        let announced = match carried.map(parse_upload_objects) {
            Some(Some(list)) => list,
            Some(None) => {
                tracing::debug!("not reading ahead: a malformed {HEADER_UPLOAD_OBJECTS}");
                continue;
            }
            None => match service.announced_uploads(&first.access) {
                Ok(Some(list)) => list,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!("not reading ahead: {}", crate::agent::chain(&e));
                    continue;
                }
            },
        };
        let outgoing = outgoing.get_or_insert_with(|| outgoing_of(service.env()));
        // The objects read ahead act on the first's action, without the list.
        let mut action = first.action.clone();
        action
            .header
            .retain(|k, _| !k.eq_ignore_ascii_case(HEADER_UPLOAD_OBJECTS));
        // The store's copies are looked at before the queue is locked.
        let chosen = admitted(&announced, outgoing.as_ref(), &service.env().store);
        let mut queued = 0;
        let mut q = lock.lock().expect("queue lock");
        for (oid, size, path) in chosen.stored {
            if q.seen.contains_key(&oid.0) {
                continue;
            }
            q.seen.insert(oid.0, Seen::InFlight(Vec::new()));
            q.pending.push(Pending {
                job: UploadJob {
                    oid,
                    size,
                    path,
                    access: first.access.clone(),
                    action: action.clone(),
                },
                reply: None,
                packed: None,
            });
            queued += 1;
        }
        drop(q);
        let from = if carried.is_some() {
            "the answer"
        } else {
            "the server"
        };
        if chosen.not_outgoing > 0 {
            tracing::info!(
                "not reading ahead {} objects the list names: this push does not contain them",
                chosen.not_outgoing
            );
        }
        tracing::info!("read ahead of git-lfs: {queued} objects queued (list from {from})");
        cv.notify_all();
    }
}

/// What the push may contain, by the git layer's rule; nothing when that cannot be told.
fn outgoing_of(env: &AgentEnv) -> Box<dyn PushContents> {
    let nothing = Box::new(HashSet::<(Oid, u64)>::new());
    let Some(work_out) = &env.outgoing else {
        tracing::debug!("not reading ahead: this agent cannot tell what its push contains");
        return nothing;
    };
    let started = Instant::now();
    match work_out() {
        Ok(contents) => {
            let secs = started.elapsed().as_secs_f64();
            tracing::debug!(secs, "worked out what this push may contain");
            contents
        }
        Err(e) => {
            tracing::warn!("not reading ahead of git-lfs: {}", crate::agent::chain(&e));
            nothing
        }
    }
}

/// The objects of a list to read ahead, and how many it named that the push may not contain.
#[derive(Debug, Default)]
struct Admitted {
    /// Small, that the push may contain at the size the list says, stored at that size.
    stored: Vec<(Oid, u64, PathBuf)>,
    not_outgoing: usize,
}

/// Chooses from `announced` what to read ahead: objects the coordinator takes (small ones),
/// that the push may contain (`outgoing`, oid and size), stored at that size.
fn admitted(
    announced: &[AnnouncedObject],
    outgoing: &dyn PushContents,
    store: &LfsStore,
) -> Admitted {
    let mut chosen = Admitted::default();
    for object in announced.iter().filter(|o| o.size <= SHARED_MAX_BYTES) {
        let Some(oid) = hex32(&object.oid).map(Oid) else {
            continue;
        };
        if !outgoing.may_contain(&oid, object.size) {
            chosen.not_outgoing += 1;
            continue;
        }
        if let Some(path) = store.find(&oid, object.size) {
            chosen.stored.push((oid, object.size, path));
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announced(oid: Oid, size: u64) -> AnnouncedObject {
        AnnouncedObject {
            oid: oid.to_hex(),
            size,
        }
    }

    /// Only objects the push may contain are read ahead, at the size its pointers say, and
    /// only from the store: an object the list names that the push does not contain is
    /// counted and left alone even though the store holds it.
    #[test]
    fn only_outgoing_stored_small_objects_are_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let store = LfsStore::in_dir(dir.path());
        let stored = |byte: u8, size: usize| {
            let oid = Oid([byte; 32]);
            let path = store.path(&oid);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, vec![byte; size]).unwrap();
            oid
        };
        let pushed = stored(1, 10);
        let secret = stored(2, 10);
        let resized = stored(3, 10);
        let missing = Oid([4; 32]);
        let big = stored(5, 10);
        let outgoing: HashSet<(Oid, u64)> = [
            (pushed, 10),
            (resized, 11),
            (missing, 10),
            (big, SHARED_MAX_BYTES + 1),
        ]
        .into();
        let list = [
            announced(pushed, 10),
            announced(secret, 10),
            // The list's size must be the pointer's.
            announced(resized, 10),
            announced(missing, 10),
            announced(big, SHARED_MAX_BYTES + 1),
        ];
        let chosen = admitted(&list, &outgoing, &store);
        let oids: Vec<Oid> = chosen.stored.iter().map(|(oid, _, _)| *oid).collect();
        assert_eq!(oids, vec![pushed]);
        assert_eq!(chosen.stored[0].2, store.path(&pushed));
        assert_eq!(chosen.not_outgoing, 2, "{chosen:?}");
        // Without a list of what the push contains, nothing is read ahead.
        let none = admitted(&list, &HashSet::<(Oid, u64)>::new(), &store);
        assert!(none.stored.is_empty());
    }
}
