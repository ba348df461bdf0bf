//! Uploading what the destination lacks, `jobs` objects at a time.
//!
//! The main thread asks the Batch API about one group of objects at a time and queues the
//! uploads it answers for; `jobs` workers, each with its own agent backend, send them. The
//! queue holds at most `jobs` objects, so memory is bounded by the workers (one xorb being
//! built each), whatever the repository's size. The first failure stops the run: what was
//! uploaded is registered and the Batch API of a re-run skips it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::credentials::strip_userinfo;
use crate::lfs_objects::LfsObject;
use crate::migrate::progress::Observer;
use crate::repo::Repo;
use crate::GitError;
use git_xet_io::human::human_bytes;
use git_xet_lfs::action::XetAction;
use git_xet_lfs::batch::{BatchClient, BATCH_SIZE};
use git_xet_lfs::objects::{AgentEnv, ObjectService};
use git_xet_lfs::pointer::Oid;
use git_xet_lfs::protocol::{Action, Operation};
use git_xet_lfs::LfsError;

/// What the upload phase did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Uploaded {
    pub uploaded: u64,
    pub already_present: u64,
    pub uploaded_bytes: u64,
    /// Bytes the uploads put into new xorbs (after dedup and compression).
    pub bytes_stored: u64,
}

struct Job {
    obj: LfsObject,
    action: Action,
    verify: Option<Action>,
}

struct Done {
    obj: LfsObject,
    verify: Option<Action>,
    stored: u64,
    seconds: f64,
}

/// Where finished uploads are accounted for (the main thread, which also calls `verify`
/// actions: the Batch API client stays on the runtime it was made for).
struct Tally<'a> {
    batch: &'a BatchClient,
    rt: &'a tokio::runtime::Handle,
    progress: &'a dyn Observer,
    totals: Uploaded,
    failure: Option<GitError>,
}

/// Uploads every object of `objects` the server at `batch` lacks.
pub fn upload_missing(
    repo: &Repo,
    batch: &BatchClient,
    rt: &tokio::runtime::Handle,
    objects: &[LfsObject],
    jobs: usize,
    progress: &dyn Observer,
) -> Result<Uploaded, GitError> {
    let jobs = jobs.max(1);
    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(jobs);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = mpsc::channel::<Result<Done, GitError>>();
    let stop = Arc::new(AtomicBool::new(false));
    let mut tally = Tally {
        batch,
        rt,
        progress,
        totals: Uploaded::default(),
        failure: None,
    };
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            let (rx, tx, stop) = (job_rx.clone(), done_tx.clone(), stop.clone());
            let env = crate::objects::env_for(
                repo,
                repo.lfs_store(),
                batch.http(),
                batch.authenticator().clone(),
            );
            scope.spawn(move || worker(repo, env, &rx, &tx, &stop));
        }
        // Only the workers hold the queue's receiver: if they all end, sending fails.
        drop(job_rx);
        drop(done_tx);
        for group in objects.chunks(BATCH_SIZE) {
            if let Err(e) = queue_group(batch, rt, group, &job_tx, &done_rx, &mut tally) {
                tally.failure.get_or_insert(e);
            }
            if tally.failure.is_some() {
                break;
            }
        }
        drop(job_tx);
        if tally.failure.is_some() {
            stop.store(true, Ordering::Relaxed);
        }
        tally.drain(&done_rx, true);
    });
    match tally.failure {
        Some(e) => Err(e),
        None => Ok(tally.totals),
    }
}

/// Asks the server about one group and queues the uploads it wants.
fn queue_group(
    batch: &BatchClient,
    rt: &tokio::runtime::Handle,
    group: &[LfsObject],
    jobs: &mpsc::SyncSender<Job>,
    done: &mpsc::Receiver<Result<Done, GitError>>,
    tally: &mut Tally,
) -> Result<(), GitError> {
    let specs: Vec<(Oid, u64)> = group.iter().map(|o| (o.oid, o.size)).collect();
    let answer = rt.block_on(batch.batch(Operation::Upload, &["xet"], &specs))?;
    super::require_xet(&answer.transfer, batch.endpoint())?;
    for obj in group {
        let entry = answer.objects.iter().find(|b| b.oid == obj.oid);
        if let Some(err) = entry.and_then(|e| e.error.clone()) {
            return Err(GitError::Object {
                path: obj.path.clone(),
                source: Box::new(LfsError::object_refused(
                    strip_userinfo(batch.endpoint()),
                    obj.oid,
                    err.code,
                    err.message,
                )),
            });
        }
        let Some(action) = entry.and_then(|e| e.action.clone()) else {
            tally.totals.already_present += 1;
            tally
                .progress
                .object_done(obj.size, &format!("{} already on the server", obj.path));
            continue;
        };
        let job = Job {
            obj: obj.clone(),
            action,
            verify: entry.and_then(|e| e.verify.clone()),
        };
        // Blocks while every worker is busy and the queue is full: bounded memory.
        if jobs.send(job).is_err() {
            break; // every worker ended: the failure that ended them is in `done`
        }
        tally.drain(done, false);
        if tally.failure.is_some() {
            break;
        }
    }
    Ok(())
}

impl Tally<'_> {
    /// Accounts for finished uploads; with `wait`, until every worker has ended.
    fn drain(&mut self, rx: &mpsc::Receiver<Result<Done, GitError>>, wait: bool) {
        loop {
            let next = if wait {
                rx.recv().ok()
            } else {
                rx.try_recv().ok()
            };
            let Some(result) = next else { return };
            if let Err(e) = result.and_then(|done| self.finish(done)) {
                self.failure.get_or_insert(e);
            }
        }
    }

    fn finish(&mut self, done: Done) -> Result<(), GitError> {
        if let Some(verify) = &done.verify {
            self.rt
                .block_on(self.batch.verify(verify, &done.obj.oid, done.obj.size))?;
        }
        self.totals.uploaded += 1;
        self.totals.uploaded_bytes += done.obj.size;
        self.totals.bytes_stored += done.stored;
        self.progress.object_done(
            done.obj.size,
            &format!(
                "uploaded {} ({}, {} new, {:.1}s)",
                done.obj.path,
                human_bytes(done.obj.size),
                human_bytes(done.stored),
                done.seconds
            ),
        );
        Ok(())
    }
}

fn worker(
    repo: &Repo,
    env: AgentEnv,
    jobs: &Mutex<mpsc::Receiver<Job>>,
    done: &mpsc::Sender<Result<Done, GitError>>,
    stop: &AtomicBool,
) {
    let mut service = ObjectService::new(env);
    loop {
        let next = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(job) = next else { break };
        if stop.load(Ordering::Relaxed) {
            continue; // empty the queue so that the main thread never waits on it
        }
        let before = std::time::Instant::now();
        let result = upload_one(&mut service, repo, &job.obj, job.action).map(|stored| Done {
            obj: job.obj,
            verify: job.verify,
            stored,
            seconds: before.elapsed().as_secs_f64(),
        });
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        if done.send(result).is_err() {
            break;
        }
    }
    service.shutdown();
}

/// Uploads one object; returns the bytes its new xorbs added on the server.
fn upload_one(
    service: &mut ObjectService,
    repo: &Repo,
    obj: &LfsObject,
    action: Action,
) -> Result<u64, GitError> {
    let access = XetAction::from_action(Some(&action), Operation::Upload)?;
    let path = repo.lfs_object_path(&obj.oid);
    let stats = service.upload(obj.oid, obj.size, &path, &access, None)?;
    Ok(stats.xorb_bytes_sent)
}
