//! The custom transfer agent's backend: an adapter from git-lfs's messages (`init`, upload
//! and download requests with their `xet` actions) to the typed [`ObjectService`], which
//! does the work. Uploads are answered only after the shard is registered, because git-lfs
//! kills the agent about 30 s after `terminate`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::action::XetAction;
use crate::agent::TransferBackend;
use crate::coordinator::{Follower, Role, SHARED_MAX_BYTES};
use crate::objects::{AgentEnv, ObjectDownload, ObjectService, UploadJob};
use crate::progress::Progress;
use crate::protocol::{InitRequest, Operation, TransferRequest};
use crate::LfsError;
use git_xet_client::ProgressFn;

/// Works out the environment when a transfer first needs it.
pub type EnvLookup = Box<dyn FnOnce() -> Result<AgentEnv, LfsError> + Send>;

/// The environment as `init` leaves it.
pub enum EnvStart {
    Ready(AgentEnv),
    /// Asked of git by the first transfer; its failure fails each of them. git-lfs starts
    /// all its agents (eight by default) one after another, each waiting for the previous
    /// one's `init` answer, and most get no object in a small push: neither the answer nor
    /// the idle agents should start git.
    Later(EnvLookup),
}

/// Starts the environment at `init` (an error is answered with code 32).
pub type EnvFactory = Box<dyn FnMut(&InitRequest) -> Result<EnvStart, LfsError>>;

/// Joins the push's coordinator for a remote without working out the environment, when
/// the repository's layout makes its socket plain (the git layer knows when).
pub type QuickFollow = Box<dyn FnOnce(&str) -> Option<Follower>>;

/// Where the session's environment stands.
enum EnvState {
    /// No successful `init` yet.
    None,
    Pending(EnvLookup),
    Ready(Box<ObjectService>),
    /// Why it could not be set up, for every transfer that needs it.
    Failed(Arc<dyn std::error::Error + Send + Sync>),
}

pub struct XetBackend {
    factory: EnvFactory,
    operation: Option<Operation>,
    env: EnvState,
    /// `init`'s remote: the push's coordinator is per remote.
    remote: String,
    /// `init`'s count of agents git-lfs runs.
    agents: u32,
    /// How small objects are uploaded (see `coordinator`).
    role: Role,
    /// Tried once, at the first small object while the environment is still to be looked up.
    quick_follow: Option<QuickFollow>,
}

impl XetBackend {
    pub fn new(factory: EnvFactory) -> XetBackend {
        XetBackend {
            factory,
            operation: None,
            env: EnvState::None,
            remote: String::new(),
            agents: 1,
            role: Role::Undecided,
            quick_follow: None,
        }
    }

    /// Small objects first try `quick`: an agent that joins the push's coordinator that way
    /// never asks git for its environment (unless the coordinator goes away).
    pub fn with_quick_follow(mut self, quick: QuickFollow) -> XetBackend {
        self.quick_follow = Some(quick);
        self
    }

    /// Becomes a follower through [`QuickFollow`] if this is the agent's first small object
    /// and the environment is not looked up yet (git-lfs gives most agents of a push only
    /// small objects, after the coordinator's first: each would otherwise start git twice).
    fn try_quick_follow(&mut self) {
        if !matches!(self.role, Role::Undecided) || !matches!(self.env, EnvState::Pending(_)) {
            return;
        }
        let Some(quick) = self.quick_follow.take() else {
            return;
        };
        if let Some(follower) = quick(&self.remote) {
            tracing::debug!("following the push's coordinator (no environment lookup)");
            self.role = Role::Follower(follower);
        }
    }

    /// The service, once what `init` started is settled.
    fn service(&mut self) -> Result<&mut ObjectService, LfsError> {
        if matches!(self.env, EnvState::Pending(_)) {
            let EnvState::Pending(lookup) = std::mem::replace(&mut self.env, EnvState::None) else {
                unreachable!("matched above")
            };
            if let Err(e) = lookup().and_then(|env| self.adopt(env)) {
                self.env = EnvState::Failed(match e {
                    LfsError::Setup(cause) => cause,
                    other => Arc::new(other),
                });
            }
        }
        match &mut self.env {
            EnvState::Ready(service) => Ok(service),
            EnvState::Failed(e) => Err(LfsError::Setup(e.clone())),
            EnvState::None | EnvState::Pending(_) => Err(LfsError::Internal(
                "transfer before a successful init".into(),
            )),
        }
    }

    fn adopt(&mut self, env: AgentEnv) -> Result<(), LfsError> {
        if self.operation == Some(Operation::Download) {
            env.store.create_tmp_dir()?;
        }
        self.env = EnvState::Ready(Box::new(ObjectService::new(env)));
        Ok(())
    }
}

impl XetBackend {
    /// Uploads through the push's coordinator (joined or become at the first small object);
    /// `None` when this agent must upload the object itself.
    fn shared_upload(
        &mut self,
        job: &UploadJob,
        progress: &Progress,
    ) -> Option<Result<(), LfsError>> {
        if matches!(self.role, Role::Undecided) {
            let env = self.service().ok()?.env().clone();
            self.role = Role::settle(&env, &self.remote, self.agents);
        }
        let verdict = match &mut self.role {
            Role::Coordinator(c) => c.submit(job.clone(), Some(progress_callback(progress))),
            Role::Follower(f) => match f.upload(job) {
                Ok(verdict) => verdict,
                Err(e) => {
                    tracing::warn!(oid = %job.oid, "the push's coordinating agent is gone ({e}); uploading from this agent");
                    // The next object joins or becomes a new coordinator.
                    self.role = Role::Undecided;
                    return None;
                }
            },
            Role::Undecided | Role::Alone => return None,
        };
        Some(verdict.map_or(Ok(()), |e| Err(LfsError::Coordinated(e))))
    }

    fn direct_upload(&mut self, job: &UploadJob, progress: &Progress) -> Result<(), LfsError> {
        let progress = progress_callback(progress);
        self.service()?
            .upload(job.oid, job.size, &job.path, &job.access, Some(progress))
            .map(|_| ())
    }
}

impl TransferBackend for XetBackend {
    fn init(&mut self, init: &InitRequest) -> Result<(), LfsError> {
        let start = (self.factory)(init)?;
        self.operation = Some(init.operation);
        self.remote = init.remote.clone();
        self.agents = if init.concurrent {
            init.concurrent_transfers.max(1)
        } else {
            1
        };
        match start {
            EnvStart::Ready(env) => self.adopt(env)?,
            EnvStart::Later(lookup) => self.env = EnvState::Pending(lookup),
        }
        Ok(())
    }

    fn upload(&mut self, req: &TransferRequest, progress: &Progress) -> Result<(), LfsError> {
        let small = req.size <= SHARED_MAX_BYTES;
        if small {
            self.try_quick_follow();
        }
        // An environment that could not be set up is the first thing to say (to an agent
        // that needs it).
        let follows = small && matches!(self.role, Role::Follower(_));
        if !follows {
            self.service()?;
        }
        let access = XetAction::from_action(req.action.as_ref(), Operation::Upload)?;
        let path = req
            .path
            .clone()
            .ok_or_else(|| LfsError::Protocol("upload without a path".into()))?;
        if small {
            let job = UploadJob {
                oid: req.oid,
                size: req.size,
                path,
                access,
                action: req.action.clone().unwrap_or_default(),
            };
            match self.shared_upload(&job, progress) {
                Some(outcome) => return outcome,
                None => return self.direct_upload(&job, progress),
            }
        }
        let progress = progress_callback(progress);
        self.service()?
            .upload(req.oid, req.size, &path, &access, Some(progress))
            .map(|_| ())
    }

    fn download(
        &mut self,
        req: &TransferRequest,
        progress: &Progress,
    ) -> Result<PathBuf, LfsError> {
        let service = self.service()?;
        let want = ObjectDownload {
            oid: req.oid,
            size: req.size,
            access: XetAction::from_action(req.action.as_ref(), Operation::Download)?,
        };
        let progress = progress_callback(progress);
        service.download(&want, Some(progress))
    }

    fn terminate(&mut self) {
        if let Role::Coordinator(c) = &self.role {
            c.close();
        }
        if let EnvState::Ready(service) = &mut self.env {
            service.shutdown();
        }
    }
}

fn progress_callback(progress: &Progress) -> ProgressFn {
    let progress = progress.clone();
    Arc::new(move |done, _total| progress.set(done))
}
