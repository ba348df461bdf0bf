//! `git-lfs-transfer <repo> <operation>`: git-lfs's pure-ssh protocol (git-lfs's
//! docs/proposals/ssh_adapter.md), version 1. `batch`, `get-object`, `put-object` and
//! `verify-object` are served through the running server's HTTP API ([`upstream`]), and so
//! are `lock`, `list-lock` and `unlock` ([`locks`]).

pub mod locks;
pub mod pkt;
pub mod upstream;

use std::io::{Read, Write};
use std::sync::atomic::Ordering;

use crate::command::LfsOperation;
use crate::ShellError;
use pkt::{PktIo, Request};
use upstream::{ObjectResponse, Upstream};

/// Most objects in one `batch` (git-lfs sends 100 by default).
const MAX_BATCH: usize = 10_000;

/// What the session needs from the server: the Batch API and basic transfers.
pub trait Objects {
    fn batch(
        &self,
        operation: LfsOperation,
        objects: &[(String, u64)],
        refname: Option<&str>,
    ) -> Result<Vec<ObjectResponse>, ShellError>;
    fn download(
        &self,
        action: &upstream::Action,
    ) -> Result<(Option<u64>, Box<dyn Read>), ShellError>;
    fn upload(
        &self,
        action: &upstream::Action,
        body: Box<dyn Read + Send>,
        size: u64,
    ) -> Result<(), ShellError>;
}

/// Everything a session relays: objects and locks.
pub trait Remote: Objects + locks::Locks {}

impl<T: Objects + locks::Locks> Remote for T {}

impl Objects for Upstream {
    fn batch(
        &self,
        operation: LfsOperation,
        objects: &[(String, u64)],
        refname: Option<&str>,
    ) -> Result<Vec<ObjectResponse>, ShellError> {
        Upstream::batch(self, operation, objects, refname)
    }

    fn download(
        &self,
        action: &upstream::Action,
    ) -> Result<(Option<u64>, Box<dyn Read>), ShellError> {
        let response = Upstream::download(self, action)?;
        Ok((response.content_length(), Box::new(response)))
    }

    fn upload(
        &self,
        action: &upstream::Action,
        body: Box<dyn Read + Send>,
        size: u64,
    ) -> Result<(), ShellError> {
        Upstream::upload(self, action, body, size)
    }
}

/// Serves one session until the client quits or closes the connection.
pub fn serve<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    operation: LfsOperation,
    remote: &dyn Remote,
) -> Result<(), ShellError> {
    io.advertise(&["version=1", "locking"])?;
    let objects: &dyn Objects = remote;
    while let Some(request) = io.read_request()? {
        let command = request.command.clone();
        let (verb, oid) = match command.split_once(' ') {
            Some((verb, rest)) => (verb, Some(rest)),
            None => (command.as_str(), None),
        };
        match (verb, oid) {
            ("version", Some("1")) => finish_plain(io, &request, 200, "")?,
            ("version", _) => finish_plain(io, &request, 400, "only version 1 is supported")?,
            ("quit", None) => {
                finish_plain(io, &request, 200, "")?;
                return Ok(());
            }
            ("batch", None) => batch(io, &request, operation, objects)?,
            ("get-object", Some(oid)) if operation == LfsOperation::Download => {
                get_object(io, &request, oid, objects)?
            }
            ("put-object", Some(oid)) if operation == LfsOperation::Upload => {
                put_object(io, &request, oid, objects)?
            }
            ("verify-object", Some(oid)) if operation == LfsOperation::Upload => {
                verify_object(io, &request, oid, objects)?
            }
            ("get-object" | "put-object" | "verify-object", _) => finish_plain(
                io,
                &request,
                405,
                &format!(
                    "{verb} is not allowed in a session for {}",
                    operation.as_str()
                ),
            )?,
            ("lock" | "list-lock" | "list-locks" | "unlock", _) if request.has_body => {
                finish_plain(io, &request, 400, &format!("{verb} takes no data"))?
            }
            // git-lfs 3.3 and older send its verify as `list-locks`.
            ("list-lock" | "list-locks", None) => locks::list(io, &request, operation, remote)?,
            ("lock", None) if operation == LfsOperation::Upload => {
                locks::lock(io, &request, remote)?
            }
            ("unlock", Some(id)) if operation == LfsOperation::Upload => {
                locks::unlock(io, &request, id, remote)?
            }
            ("lock" | "unlock", _) if operation != LfsOperation::Upload => finish_plain(
                io,
                &request,
                405,
                &format!("{verb} is only allowed in a session for upload"),
            )?,
            _ => finish_plain(io, &request, 400, &format!("unknown command {verb:?}"))?,
        }
    }
    Ok(())
}

/// Answers a request that needs no body: the body (if any) is skipped first.
fn finish_plain<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    status: u16,
    message: &str,
) -> Result<(), ShellError> {
    if request.has_body {
        io.drain()?;
    }
    match status {
        200 => io.status(200, &[], None),
        _ => io.error(status, message),
    }
}

/// The object ids of requests stay text (they go upstream and come back as written); this
/// only checks them, by the one rule.
fn is_oid(oid: &str) -> bool {
    git_xet_core::lfs::parse_oid(oid).is_ok()
}

/// The `size` argument of an object command.
fn size_arg(request: &Request) -> Option<u64> {
    request.arg("size").and_then(|s| s.parse().ok())
}

fn batch<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    operation: LfsOperation,
    objects: &dyn Objects,
) -> Result<(), ShellError> {
    if !request.has_body {
        return io.error(400, "batch needs a delimiter and object lines");
    }
    let lines = match io.read_lines(MAX_BATCH) {
        Ok(lines) => lines,
        Err(ShellError::Protocol(why)) => {
            io.drain()?;
            return io.error(400, &why);
        }
        Err(e) => return Err(e),
    };
    if request.arg("hash-algo").is_some_and(|a| a != "sha256") {
        return io.error(409, "only the sha256 hash algorithm is supported");
    }
    let mut wanted = Vec::with_capacity(lines.len());
    for line in &lines {
        let mut fields = line.split(' ');
        let (Some(oid), Some(size)) = (fields.next(), fields.next()) else {
            return io.error(400, &format!("malformed object line {line:?}"));
        };
        let Some(size) = size.parse::<u64>().ok().filter(|_| is_oid(oid)) else {
            return io.error(400, &format!("malformed object line {line:?}"));
        };
        wanted.push((oid.to_string(), size));
    }
    let answers = match objects.batch(operation, &wanted, request.arg("refname")) {
        Ok(a) => a,
        Err(e) => return upstream_error(io, e),
    };
    let action = operation.as_str();
    let out: Vec<String> = wanted
        .iter()
        .map(|(oid, size)| {
            let answer = answers.iter().find(|a| &a.oid == oid);
            // An object the server cannot serve still gets its action: the error comes back
            // on get-object/put-object, where git-lfs reports it per object (an object left
            // out of the answer would never finish).
            let needed = answer.is_none_or(|a| a.error.is_some() || a.actions.contains_key(action));
            format!("{oid} {size} {}", if needed { action } else { "noop" })
        })
        .collect();
    io.status(200, &["hash-algo=sha256".to_string()], Some(&out))
}

/// The server's answer for one object: the action to follow, or the status and message
/// the client gets; `Ok(None)` when the server needs nothing done.
fn one_object(
    objects: &dyn Objects,
    operation: LfsOperation,
    oid: &str,
    size: u64,
) -> Result<Result<Option<upstream::Action>, (u16, String)>, ShellError> {
    let answers = match objects.batch(operation, &[(oid.to_string(), size)], None) {
        Ok(a) => a,
        Err(ShellError::Upstream { status, message }) => return Ok(Err((status, message))),
        Err(e) => return Err(e),
    };
    let Some(mut answer) = answers.into_iter().find(|a| a.oid == oid) else {
        return Ok(Err((
            502,
            format!("the server's answer does not list {oid}"),
        )));
    };
    if let Some(error) = answer.error {
        // A code that is no HTTP status is the server's fault.
        let status = u16::try_from(error.code).unwrap_or(502);
        return Ok(Err((status, error.message)));
    }
    Ok(Ok(answer.actions.remove(operation.as_str())))
}

/// The HTTP server's refusal as this request's status; any other failure ends the session.
fn upstream_error<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    e: ShellError,
) -> Result<(), ShellError> {
    match e {
        ShellError::Upstream { status, message } => io.error(status, &message),
        e => Err(e),
    }
}

fn get_object<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    oid: &str,
    objects: &dyn Objects,
) -> Result<(), ShellError> {
    if request.has_body {
        io.drain()?;
    }
    if !is_oid(oid) {
        return io.error(400, &format!("invalid object id {oid:?}"));
    }
    let size = size_arg(request).unwrap_or(0);
    let action = match one_object(objects, LfsOperation::Download, oid, size)? {
        Ok(Some(action)) => action,
        Ok(None) => return io.error(404, &format!("object {oid} is not available for download")),
        Err((status, message)) => return io.error(status, &message),
    };
    let (length, mut body) = match objects.download(&action) {
        Ok(d) => d,
        Err(e) => return upstream_error(io, e),
    };
    let Some(length) = length else {
        return io.error(502, "the server sent the object without a length");
    };
    let sent = io.data(&[format!("size={length}")], &mut body)?;
    if sent != length {
        // The status went out already: ending the session is the only way to say it.
        return Err(ShellError::Protocol(format!(
            "object {oid}: the server sent {sent} of {length} bytes"
        )));
    }
    Ok(())
}

fn put_object<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    oid: &str,
    objects: &dyn Objects,
) -> Result<(), ShellError> {
    if !request.has_body {
        return io.error(400, "put-object needs a delimiter and the object's data");
    }
    let (Some(size), true) = (size_arg(request), is_oid(oid)) else {
        io.drain()?;
        return io.error(
            400,
            "put-object needs a valid object id and a size argument",
        );
    };
    let action = match one_object(objects, LfsOperation::Upload, oid, size)? {
        Ok(Some(action)) => action,
        Ok(None) => {
            // Stored already: nothing to send on.
            io.drain()?;
            return io.status(200, &[], None);
        }
        Err((status, message)) => {
            io.drain()?;
            return io.error(status, &message);
        }
    };
    let reader = io.data_reader(size);
    let state = reader.state();
    let sent = objects.upload(&action, Box::new(reader), size);
    let extra = io.end_data(state.at_flush.load(Ordering::SeqCst))?;
    match sent {
        Err(e) => upstream_error(io, e),
        Ok(()) if extra > 0 || state.overflow.load(Ordering::SeqCst) => io.error(
            400,
            &format!("more data than the size of {oid} ({size} bytes)"),
        ),
        Ok(()) => io.status(200, &[], None),
    }
}

fn verify_object<R: Read + Send + 'static, W: Write>(
    io: &mut PktIo<R, W>,
    request: &Request,
    oid: &str,
    objects: &dyn Objects,
) -> Result<(), ShellError> {
    if request.has_body {
        io.drain()?;
    }
    let (Some(size), true) = (size_arg(request), is_oid(oid)) else {
        return io.error(
            400,
            "verify-object needs a valid object id and a size argument",
        );
    };
    // Stored with this size exactly when the server needs no upload of it.
    match one_object(objects, LfsOperation::Upload, oid, size)? {
        Ok(None) => io.status(200, &[], None),
        Ok(Some(_)) => io.error(404, &format!("object {oid} ({size} bytes) is not stored")),
        Err((status, message)) => io.error(status, &message),
    }
}

#[cfg(test)]
mod tests;
