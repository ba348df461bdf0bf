//! The coordinator's batches: gathering what the agents hand over, packing it into one
//! session, registering it on a thread of its own and answering each object.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "test-hooks")]
use super::ENV_TEST_ABORT;
use super::{Outcome, Pending, Queue, Seen, LANES, MAX_BATCH_FILES, MAX_GATHER, QUIET};
use crate::objects::{AgentEnv, BatchUpload, ObjectService, RegisteredBatch};
use crate::LfsError;

/// Takes what is in flight, packs it as one session and hands it to a thread that registers
/// it and answers, then gathers the next batch meanwhile: up to [`LANES`] batches register at
/// once. Objects are packed as they come, while the batch gathers more: the round's reading
/// and packing overlap git-lfs handing out its objects, and a batch's round trip overlaps
/// the gathering of the next.
pub(super) fn batch_loop(
    shared: &Arc<(Mutex<Queue>, Condvar)>,
    mut service: ObjectService,
    settle: &mpsc::Sender<RegisteredBatch>,
) {
    let (lock, cv) = &**shared;
    loop {
        let lane = {
            let mut q = lock.lock().expect("queue lock");
            loop {
                if let Some(lane) = free_lane(&q) {
                    q.lanes[lane] = true;
                    break lane;
                }
                q = cv.wait(q).expect("queue lock");
            }
        };
        let gathered = gather(shared, &mut service, lane);
        // Only objects an agent handed over have an agent waiting.
        let count = gathered.batch.iter().filter(|p| p.reply.is_some()).count();
        match gathered.session {
            Ok(session) => {
                lock.lock().expect("queue lock").registering += count;
                let shared = shared.clone();
                let settle = settle.clone();
                let env = service.env().clone();
                let timings = gathered.timings;
                let batch = gathered.batch;
                let oids: Vec<[u8; 32]> = batch.iter().map(|p| p.job.oid.0).collect();
                let spawned = std::thread::Builder::new()
                    .name("xet-register".into())
                    .spawn(move || {
                        let outcomes = register(session, &batch, &timings, &shared, &settle, env);
                        finish(&shared, batch, outcomes, lane, count);
                    });
                if let Err(e) = spawned {
                    // Without a thread the batch is lost: its objects fail (git-lfs retries),
                    // their own agents through their dropped senders, agents waiting on one of
                    // them (read ahead, or handed over twice) here.
                    tracing::warn!("cannot start a thread to register a batch: {e}");
                    let why = format!("cannot start a thread to register this object's batch: {e}");
                    let mut q = lock.lock().expect("queue lock");
                    abandon(&mut q, &oids, &why);
                    q.registering -= count;
                    q.lanes[lane] = false;
                    cv.notify_all();
                }
            }
            Err(e) => {
                let outcomes = one_by_one(&mut service, &gathered.batch, &e);
                finish(shared, gathered.batch, outcomes, lane, 0);
            }
        }
    }
}

/// The lane the next batch may take, if one may start: with objects pending, one of the
/// first [`LANES`] - 1 lanes, or the last when the next object was read ahead (so that a
/// read-ahead batch registers while both halves of the agents' objects do).
fn free_lane(q: &Queue) -> Option<usize> {
    let first = q.pending.first()?;
    let lanes = if first.reply.is_none() {
        LANES
    } else {
        LANES - 1
    };
    q.lanes[..lanes].iter().position(|busy| !busy)
}

/// Answers a batch's objects, and every agent that handed one over meanwhile, and frees
/// its lane; `registering` is what the batch added to [`Queue::registering`].
fn finish(
    shared: &(Mutex<Queue>, Condvar),
    batch: Vec<Pending>,
    outcomes: Vec<Outcome>,
    lane: usize,
    registering: usize,
) {
    let (lock, cv) = shared;
    let mut q = lock.lock().expect("queue lock");
    for (p, outcome) in batch.into_iter().zip(outcomes) {
        let waiters = match q.seen.remove(&p.job.oid.0) {
            Some(Seen::InFlight(waiters)) => waiters,
            _ => Vec::new(),
        };
        q.waiting = q.waiting.saturating_sub(waiters.len());
        if outcome.is_none() {
            q.seen.insert(p.job.oid.0, Seen::Registered);
        }
        for reply in p.reply.iter().chain(&waiters) {
            let _ = reply.send(outcome.clone());
        }
    }
    q.registering = q.registering.saturating_sub(registering);
    q.lanes[lane] = false;
    cv.notify_all();
}

/// Fails the waiters of objects whose batch will not be registered and forgets the objects,
/// so that a later hand-over of one is uploaded anew instead of waiting for nothing.
fn abandon(q: &mut Queue, oids: &[[u8; 32]], why: &str) {
    for oid in oids {
        if let Some(Seen::InFlight(waiters)) = q.seen.remove(oid) {
            q.waiting = q.waiting.saturating_sub(waiters.len());
            for reply in waiters {
                let _ = reply.send(Some(why.to_string()));
            }
        }
    }
}

/// Pending objects of CAS URL `url` that were read ahead (all there: no agent to wait for).
fn read_ahead_pending(q: &Queue, url: &str) -> usize {
    q.pending
        .iter()
        .filter(|p| p.reply.is_none() && p.job.access.cas_url == url)
        .count()
}

/// Registers a packed batch (on its own thread); one outcome per object. The bookkeeping
/// after registration (records, marks) goes to the settling thread: registered is all an
/// answer needs. A batch that fails is uploaded object by object, so that each object gets
/// its own verdict.
fn register(
    session: BatchUpload,
    batch: &[Pending],
    timings: &Timings,
    shared: &(Mutex<Queue>, Condvar),
    settle: &mpsc::Sender<RegisteredBatch>,
    env: AgentEnv,
) -> Vec<Outcome> {
    let (lock, cv) = shared;
    let packed_at = Instant::now();
    match session.register() {
        Ok(registered) => {
            let now = Instant::now();
            let ms = |from: Instant, to: Instant| to.duration_since(from).as_secs_f64() * 1e3;
            // Where a round goes: objects coming in, packing the last, the upload.
            tracing::info!(
                files = batch.len(),
                secs = timings.started.elapsed().as_secs_f64(),
                gather_ms = ms(timings.started, timings.last_came),
                pack_ms = ms(timings.last_came, timings.packed_at),
                upload_ms = ms(packed_at, now),
                "batch registered: {}",
                registered.stats()
            );
            test_abort_after_registering(shared);
            lock.lock().expect("queue lock").settling += 1;
            if let Err(unsent) = settle.send(registered) {
                unsent.0.settle();
                lock.lock().expect("queue lock").settling -= 1;
                cv.notify_all();
            }
            vec![None; batch.len()]
        }
        Err(e) => one_by_one(&mut ObjectService::new(env), batch, &e),
    }
}

/// The test hook [`ENV_TEST_ABORT`]: aborts the process once that many batches are
/// registered, before any of the last one's objects is answered.
#[cfg(feature = "test-hooks")]
fn test_abort_after_registering(shared: &(Mutex<Queue>, Condvar)) {
    let Some(limit) = std::env::var(ENV_TEST_ABORT)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let registered = {
        let mut q = shared.0.lock().expect("queue lock");
        q.registered_batches += 1;
        q.registered_batches
    };
    if registered >= limit {
        tracing::error!("{ENV_TEST_ABORT}: aborting after {registered} batches");
        std::process::abort();
    }
}

/// Without the `test-hooks` feature there is no hook: as if the variable were unset.
#[cfg(not(feature = "test-hooks"))]
fn test_abort_after_registering(_: &(Mutex<Queue>, Condvar)) {}

/// Uploads each object of a failed batch in a session of its own.
fn one_by_one(service: &mut ObjectService, batch: &[Pending], e: &LfsError) -> Vec<Outcome> {
    tracing::warn!(
        "a batch of {} objects failed ({}); uploading them one by one",
        batch.len(),
        crate::agent::chain(e)
    );
    batch
        .iter()
        .map(|p| {
            let job = &p.job;
            let one = service.upload(job.oid, job.size, &job.path, &job.access, None);
            one.err().map(|e| crate::agent::chain(&e))
        })
        .collect()
}

/// Takes up to `max` pending objects of CAS URL `url` (a batch holds one URL's objects).
fn take_for(q: &mut Queue, url: &str, max: usize) -> Vec<Pending> {
    let mut taken = Vec::new();
    let mut i = 0;
    while i < q.pending.len() && taken.len() < max {
        if q.pending[i].job.access.cas_url == url {
            taken.push(q.pending.remove(i));
        } else {
            i += 1;
        }
    }
    taken
}

/// How many objects the batch being gathered waits for: one from each agent not waiting
/// on a batch that registers (or on an object read ahead), or half of them when none
/// registers (so that the first half's round trip overlaps the second half's gathering and
/// packing, and the halves then alternate). Agents git-lfs started count before they connect; when fewer objects come
/// (a push's last ones), the quiet ends the batch.
fn batch_target(q: &Queue) -> usize {
    let busy = q.registering + q.waiting;
    let free = q.agents.max(q.expected).saturating_sub(busy).max(1);
    let target = if busy == 0 { free.div_ceil(2) } else { free };
    target.min(MAX_BATCH_FILES)
}

/// When a batch's objects came and were packed (for its log line).
struct Timings {
    started: Instant,
    last_came: Instant,
    packed_at: Instant,
}

struct Gathered {
    batch: Vec<Pending>,
    session: Result<BatchUpload, LfsError>,
    timings: Timings,
}

/// Gathers and packs one batch until it holds [`batch_target`] objects, or none came for a
/// moment, or it waited long enough in all.
fn gather(shared: &(Mutex<Queue>, Condvar), service: &mut ObjectService, lane: usize) -> Gathered {
    let (lock, cv) = shared;
    let started = Instant::now();
    let (mut batch, url, mut target) = {
        let mut q = lock.lock().expect("queue lock");
        let url = q.pending[0].job.access.cas_url.clone();
        let target = batch_target(&q)
            .max(read_ahead_pending(&q, &url))
            .min(MAX_BATCH_FILES);
        let batch = take_for(&mut q, &url, target);
        (batch, url, target)
    };
    let mut session = service.start_batch(&batch[0].job, lane);
    let mut packed = 0;
    // Time spent waiting for objects (not packing them), bounded by MAX_GATHER.
    let mut waited = Duration::ZERO;
    // When the last object of the batch came.
    let mut last_came = started;
    loop {
        while packed < batch.len() {
            let Ok(s) = &mut session else { break };
            if let Err(e) = service.add_to_batch(s, &batch[packed].job) {
                session = Err(e);
                break;
            }
            let p = &batch[packed];
            if let Some(tell) = &p.packed {
                tell(p.job.size, p.job.size);
            }
            packed += 1;
        }
        if session.is_err() || batch.len() >= target || waited >= MAX_GATHER {
            break;
        }
        let mut q = lock.lock().expect("queue lock");
        if !q.pending.iter().any(|p| p.job.access.cas_url == url) {
            // Woken early (a batch registered, an agent joined), the quiet goes on.
            let quiet_left = QUIET.saturating_sub(last_came.elapsed());
            if quiet_left.is_zero() {
                break;
            }
            let before = Instant::now();
            q = cv.wait_timeout(q, quiet_left).expect("queue lock").0;
            waited += before.elapsed();
        }
        // Agents join as they get their first object, and registered batches free theirs.
        target = batch_target(&q)
            .max(batch.len() + read_ahead_pending(&q, &url))
            .min(MAX_BATCH_FILES)
            .max(batch.len());
        let more = take_for(&mut q, &url, target - batch.len());
        drop(q);
        if !more.is_empty() {
            last_came = Instant::now();
            batch.extend(more);
        }
    }
    Gathered {
        batch,
        session,
        timings: Timings {
            started,
            last_came,
            packed_at: Instant::now(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(agents: usize, registering: usize) -> Queue {
        Queue {
            agents,
            registering,
            ..Queue::default()
        }
    }

    #[test]
    fn an_abandoned_batch_fails_its_waiters_and_is_forgotten() {
        let mut q = queue(2, 0);
        let (tx, rx) = mpsc::channel();
        q.seen.insert([1; 32], Seen::InFlight(vec![tx]));
        q.waiting = 1;
        q.seen.insert([2; 32], Seen::Registered);
        q.seen.insert([3; 32], Seen::InFlight(Vec::new()));
        abandon(&mut q, &[[1; 32], [3; 32]], "no thread");
        assert_eq!(rx.recv().unwrap(), Some("no thread".to_string()));
        assert_eq!(q.waiting, 0);
        assert!(!q.seen.contains_key(&[1; 32]) && !q.seen.contains_key(&[3; 32]));
        assert!(matches!(q.seen.get(&[2; 32]), Some(Seen::Registered)));
    }

    #[test]
    fn agents_git_lfs_started_count_before_they_connect() {
        let mut q = queue(1, 0);
        q.expected = 50;
        assert_eq!(batch_target(&q), 25);
        q.registering = 1;
        assert_eq!(batch_target(&q), 49);
        // More connected than git-lfs said (two pushes' agents): the connected ones count.
        q.agents = 60;
        q.registering = 0;
        assert_eq!(batch_target(&q), 30);
    }

    #[test]
    fn a_batch_waits_for_half_the_agents_when_none_registers_else_for_all_free_ones() {
        // A group's start: 50 idle agents, two halves.
        assert_eq!(batch_target(&queue(50, 0)), 25);
        // The second half, while the first registers.
        assert_eq!(batch_target(&queue(50, 25)), 25);
        assert_eq!(batch_target(&queue(34, 0)), 17);
        assert_eq!(batch_target(&queue(34, 17)), 17);
        assert_eq!(batch_target(&queue(35, 0)), 18);
        // The push's first object: the coordinator's own agent alone.
        assert_eq!(batch_target(&queue(1, 0)), 1);
        // Every agent waits on a registering batch (one that joined since counts): one.
        assert_eq!(batch_target(&queue(4, 4)), 1);
        assert_eq!(batch_target(&queue(4, 9)), 1);
        assert_eq!(batch_target(&queue(5000, 0)), MAX_BATCH_FILES);
    }

    #[test]
    fn agents_waiting_on_objects_read_ahead_are_not_waited_for() {
        let mut q = queue(50, 10);
        q.waiting = 30;
        assert_eq!(batch_target(&q), 10);
        // Waiting on read-ahead objects alone is a batch in flight too: all the free agents.
        q.registering = 0;
        assert_eq!(batch_target(&q), 20);
    }
}
