//! `lock`, `list-lock` and `unlock` of git-lfs's ssh protocol (git-lfs's
//! docs/proposals/ssh_adapter.md, "Locks"), relayed to the running server's locking API
//! (crates/server/src/lfs/locks.rs) under the session user's token, so ownership, the admin rule for
//! forcing and the index are the HTTP API's own.

use std::io::{Read, Write};

use reqwest::Method;

use git_xet_core::api::locks::{
    CreateLockRequest, ListLocksQuery, LockList as ListAnswer, LockRef, LockResponse,
    UnlockRequest, VerifyLocksRequest, VerifyLocksResponse,
};
use git_xet_core::api::routes;

use crate::command::LfsOperation;
use crate::transfer::pkt::{PktIo, Request};
use crate::transfer::upstream::{checked, Upstream};
use crate::transfer::upstream_error;
use crate::ShellError;

/// A lock as the HTTP API describes it.
pub use git_xet_core::api::locks::{Lock as LockInfo, LockOwner as OwnerInfo};

/// The answer to `lock`.
#[derive(Debug)]
pub enum LockReply {
    Created(LockInfo),
    /// The path is locked already: that lock, and the server's message.
    Exists(LockInfo, String),
}

/// One page of locks; `ours`/`theirs` is known when the page came from a verify.
#[derive(Debug, Default)]
pub struct LockList {
    pub locks: Vec<(LockInfo, Option<bool>)>,
    pub next_cursor: Option<String>,
}

/// What a session needs from the locking API. Refusals come back as
/// [`ShellError::Upstream`] with the HTTP status, which the protocol reuses as its own.
pub trait Locks {
    fn lock(&self, path: &str, refname: Option<&str>) -> Result<LockReply, ShellError>;
    /// `GET locks` with the client's query (path, id, cursor, limit, refspec).
    fn list(&self, query: &[(&str, &str)]) -> Result<LockList, ShellError>;
    /// `POST locks/verify`: the locks split into the user's and others'.
    fn verify(
        &self,
        refname: &str,
        cursor: Option<&str>,
        limit: Option<u64>,
    ) -> Result<LockList, ShellError>;
    fn unlock(&self, id: &str, force: bool, refname: Option<&str>) -> Result<LockInfo, ShellError>;
    /// The session's user, to tell `ours` from `theirs` in a plain listing.
    fn user(&self) -> &str;
}

fn invalid(what: &str, e: reqwest::Error) -> ShellError {
    ShellError::Upstream {
        status: 502,
        message: format!("the server's {what} answer is not valid: {e}"),
    }
}

fn lock_ref(refname: Option<&str>) -> Option<LockRef> {
    refname.map(|name| LockRef { name: name.into() })
}

/// A request body as the HTTP API reads it.
fn json(body: &impl serde::Serialize) -> serde_json::Value {
    // Strings, numbers and booleans: serializing cannot fail.
    serde_json::to_value(body).expect("a lock request serializes")
}

impl Locks for Upstream {
    fn lock(&self, path: &str, refname: Option<&str>) -> Result<LockReply, ShellError> {
        let body = json(&CreateLockRequest {
            path: path.into(),
            refspec: lock_ref(refname),
        });
        let response = self.lfs_call(Method::POST, routes::LFS_LOCKS, &[], Some(&body))?;
        if response.status() == reqwest::StatusCode::CONFLICT {
            let answer: LockResponse = response.json().map_err(|e| invalid("lock", e))?;
            let message = answer
                .message
                .unwrap_or_else(|| format!("{} is already locked", answer.lock.path));
            return Ok(LockReply::Exists(answer.lock, message));
        }
        let answer: LockResponse = checked(response)?.json().map_err(|e| invalid("lock", e))?;
        Ok(LockReply::Created(answer.lock))
    }

    fn list(&self, query: &[(&str, &str)]) -> Result<LockList, ShellError> {
        let response = self.lfs_call(Method::GET, routes::LFS_LOCKS, query, None)?;
        let answer: ListAnswer = checked(response)?
            .json()
            .map_err(|e| invalid("lock list", e))?;
        Ok(LockList {
            locks: answer.locks.into_iter().map(|l| (l, None)).collect(),
            next_cursor: answer.next_cursor,
        })
    }

    fn verify(
        &self,
        refname: &str,
        cursor: Option<&str>,
        limit: Option<u64>,
    ) -> Result<LockList, ShellError> {
        let body = json(&VerifyLocksRequest {
            cursor: cursor.map(str::to_string),
            limit,
            refspec: lock_ref(Some(refname)),
        });
        let response = self.lfs_call(Method::POST, routes::LFS_LOCKS_VERIFY, &[], Some(&body))?;
        let answer: VerifyLocksResponse = checked(response)?
            .json()
            .map_err(|e| invalid("lock verify", e))?;
        let ours = answer.ours.into_iter().map(|l| (l, Some(true)));
        let theirs = answer.theirs.into_iter().map(|l| (l, Some(false)));
        Ok(LockList {
            locks: ours.chain(theirs).collect(),
            next_cursor: answer.next_cursor,
        })
    }

    fn unlock(&self, id: &str, force: bool, refname: Option<&str>) -> Result<LockInfo, ShellError> {
        let body = json(&UnlockRequest {
            force,
            refspec: lock_ref(refname),
        });
        // The id goes into the URL path: only the server's own id alphabet is sent on.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ShellError::Upstream {
                status: 404,
                message: format!("there is no lock {id:?}"),
            });
        }
        let response = self.lfs_call(Method::POST, &routes::unlock_path(id), &[], Some(&body))?;
        let answer: LockResponse = checked(response)?
            .json()
            .map_err(|e| invalid("unlock", e))?;
        Ok(answer.lock)
    }

    fn user(&self) -> &str {
        Upstream::user(self)
    }
}

/// A value on one protocol line: control characters would break the framing.
fn clean(value: &str) -> String {
    value.chars().filter(|c| !c.is_control()).collect()
}

/// The `id=`, `path=`, `locked-at=`, `ownername=` arguments git-lfs reads back.
fn lock_args(lock: &LockInfo) -> Vec<String> {
    vec![
        format!("id={}", clean(&lock.id)),
        format!("path={}", clean(&lock.path)),
        format!("locked-at={}", clean(&lock.locked_at)),
        format!("ownername={}", clean(lock.owner_name())),
    ]
}

/// `lock` (upload sessions): 201 with the new lock, 409 with the lock that holds the path.
pub fn lock<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    locks: &dyn Locks,
) -> Result<(), ShellError> {
    let Some(path) = request.arg("path").filter(|p| !p.is_empty()) else {
        return io.error(400, "lock needs a path argument");
    };
    match locks.lock(path, request.arg("refname")) {
        Ok(LockReply::Created(lock)) => io.status(201, &lock_args(&lock), None),
        Ok(LockReply::Exists(lock, message)) => {
            io.status(409, &lock_args(&lock), Some(&[clean(&message)]))
        }
        Err(e) => upstream_error(io, e),
    }
}

/// `list-lock`: with `refname` in an upload session it is git-lfs's verify (each lock marked
/// `ours` or `theirs` by the server); otherwise the plain listing, marked by owner name.
pub fn list<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    operation: LfsOperation,
    locks: &dyn Locks,
) -> Result<(), ShellError> {
    let limit = match request.arg("limit") {
        None | Some("") => None,
        Some(text) => match text.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => return io.error(400, &format!("invalid limit {:?}", clean(text))),
        },
    };
    let cursor = request.arg("cursor").filter(|c| !c.is_empty());
    let page = match request.arg("refname") {
        Some(refname) if operation == LfsOperation::Upload => locks.verify(refname, cursor, limit),
        _ => {
            let query: Vec<(&str, &str)> = ListLocksQuery::KEYS
                .into_iter()
                .filter_map(|key| request.arg(key).map(|value| (key, value)))
                .collect();
            locks.list(&query)
        }
    };
    let page = match page {
        Ok(page) => page,
        Err(e) => return upstream_error(io, e),
    };
    let mut lines = Vec::with_capacity(page.locks.len() * 5);
    for (lock, ours) in &page.locks {
        let id = clean(&lock.id);
        let ours = ours.unwrap_or(lock.owner_name() == locks.user());
        lines.push(format!("lock {id}"));
        lines.push(format!("path {id} {}", clean(&lock.path)));
        lines.push(format!("locked-at {id} {}", clean(&lock.locked_at)));
        lines.push(format!("ownername {id} {}", clean(lock.owner_name())));
        lines.push(format!(
            "owner {id} {}",
            if ours { "ours" } else { "theirs" }
        ));
    }
    let args: Vec<String> = page
        .next_cursor
        .iter()
        .map(|c| format!("next-cursor={}", clean(c)))
        .collect();
    io.status(200, &args, Some(&lines))
}

/// `unlock <id>` (upload sessions): 200 with the removed lock; 403 when it is someone
/// else's and forcing is not allowed, 404 when there is no such lock.
pub fn unlock<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    id: &str,
    locks: &dyn Locks,
) -> Result<(), ShellError> {
    let force = match request.arg("force") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return io.error(
                400,
                &format!("invalid force {:?}: expected true or false", clean(other)),
            )
        }
    };
    match locks.unlock(id, force, request.arg("refname")) {
        Ok(lock) => io.status(200, &lock_args(&lock), None),
        Err(e) => upstream_error(io, e),
    }
}
