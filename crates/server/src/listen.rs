//! Accepting and serving connections with the limits that keep slow or silent clients from
//! holding the server: a cap on connections per client address (an IPv6 client counts by
//! its /64, which one host usually holds whole), a cap on all connections (many addresses
//! together), a deadline for a request's headers, and an inactivity timeout on every
//! connection: waiting that long on the client (for a request, for body bytes, for room to
//! write) closes it, while time spent handling a request is not counted
//! (listen/inactivity.rs). Graceful shutdown stops accepting,
//! lets requests in flight finish, and closes idle connections. With TLS, each connection's
//! handshake must end within the header deadline; forwarding headers from peers that are not
//! trusted proxies are dropped before the router sees the request.

mod inactivity;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::proxy::TrustedProxies;
use inactivity::{Activity, AnswerBody, ClientBody, Inactivity};

/// Connection limits (see the module comment).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_per_address: usize,
    /// Connections open at once in all; kept below the open-files limit (see [`serve`]).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            max_per_address: 256,
            max_connections: 4096,
        }
    }
}

/// Who sent a request: the connection's address, and whether the request said it was
/// forwarded (by any peer, trusted or not: a proxy on this host makes every peer loopback).
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub ip: IpAddr,
    pub forwarded: bool,
}

impl Peer {
    /// A client on this host talking to the server directly.
    pub fn is_local(&self) -> bool {
        let ip = match self.ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(self.ip, IpAddr::V4),
            ip => ip,
        };
        ip.is_loopback() && !self.forwarded
    }
}

/// What a connection goes through before HTTP: TLS (when serving HTTPS) and the screening of
/// forwarding headers.
#[derive(Clone, Default)]
pub struct Front {
    pub tls: Option<TlsAcceptor>,
    pub trusted: Arc<TrustedProxies>,
}

/// Serves `router` on `listener` until `stop` turns true, then waits for the connections
/// still open (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    front: Front,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    let max_connections = within_open_files(limits.max_connections);
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, usually: wait instead of spinning.
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot =
            match AddressSlot::take(&open, peer.ip(), limits.max_per_address, max_connections) {
                Ok(slot) => slot,
                Err(Full::Address) => {
                    tracing::warn!(
                        peer = %peer.ip(),
                        max = limits.max_per_address,
                        "refused a connection: too many open from this address"
                    );
                    continue; // dropping `tcp` closes it
                }
                Err(Full::Server) => {
                    tracing::warn!(
                        peer = %peer.ip(),
                        max = max_connections,
                        "refused a connection: too many open in all (--max-connections)"
                    );
                    continue;
                }
            };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
        let (router, front, stop, done) =
            (router.clone(), front.clone(), stop.clone(), done_tx.clone());
        tokio::spawn(async move {
            let activity = Arc::new(Activity::default());
            let io = Inactivity::new(tcp, limits.idle_timeout, activity.clone());
            let conn = Connection {
                router,
                front: &front,
                peer: peer.ip(),
                limits,
                activity,
            };
            let result = match &front.tls {
                None => conn.serve(io, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(io)).await {
                        Ok(Ok(tls)) => conn.serve(tls, stop).await,
                        Ok(Err(e)) => Err(ConnectionError::Handshake(e)),
                        Err(_) => Err(ConnectionError::HandshakeTimeout),
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(peer = %peer, "connection closed: {e}");
            }
            drop(slot);
            drop(done);
        });
    }
    drop(done_tx);
    // Every connection task holds a sender: this returns once all have ended.
    let _ = done_rx.recv().await;
    Ok(())
}

/// One accepted connection: what serving its requests needs.
struct Connection<'a> {
    router: Router,
    front: &'a Front,
    peer: IpAddr,
    limits: Limits,
    /// What its requests are doing, for its inactivity timeout.
    activity: Arc<Activity>,
}

impl Connection<'_> {
    /// Serves HTTP/1.1 on `io` until it closes, or until `stop` and its requests in flight
    /// have ended.
    async fn serve<S>(self, io: S, mut stop: watch::Receiver<bool>) -> Result<(), ConnectionError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Connection {
            router,
            front,
            peer,
            limits,
            activity,
        } = self;
        let trusted = front.trusted.clone();
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                let forwarded = ["forwarded", "x-forwarded-for", "x-real-ip"]
                    .iter()
                    .any(|h| request.headers().contains_key(*h));
                request.extensions_mut().insert(Peer {
                    ip: peer,
                    forwarded,
                });
                trusted.screen(peer, request.headers_mut());
                // Handled until its answer is sent whole; waiting on the client only while it
                // reads its body.
                let handling = activity.handling();
                let request = request
                    .map(|body| axum::body::Body::new(ClientBody::new(body, activity.clone())));
                let answer = router.clone().oneshot(request);
                async move {
                    let response = answer.await?;
                    Ok::<_, std::convert::Infallible>(
                        response.map(|body| axum::body::Body::new(AnswerBody::new(body, handling))),
                    )
                }
            });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        let stopping = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let result = tokio::select! {
            result = conn.as_mut() => result,
            _ = stopping => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        result.map_err(ConnectionError::Http)
    }
}

/// Why a connection ended early (logged at debug level: clients hang up all the time).
#[derive(Debug, thiserror::Error)]
enum ConnectionError {
    #[error("TLS handshake failed: {0}")]
    Handshake(std::io::Error),
    #[error("TLS handshake not done within the header timeout")]
    HandshakeTimeout,
    #[error("{0}")]
    Http(hyper::Error),
}

/// Open connections: per address group, and in all.
#[derive(Default)]
struct Open {
    per_group: HashMap<IpAddr, usize>,
    total: usize,
}

/// Which cap refused a connection.
#[derive(Debug, PartialEq, Eq)]
enum Full {
    Address,
    Server,
}

/// The address a connection counts against: an IPv6 address by its /64 (a host is handed a
/// whole /64 and could otherwise open `max_per_address` from each of 2^64 addresses); an
/// IPv4 address seen on a dual-stack socket as itself.
fn group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// `wanted`, lowered to leave 256 descriptors of the open-files limit for everything else
/// (staging files, the index, git): past the limit `accept` fails and so would the rest.
fn within_open_files(wanted: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return wanted;
    }
    let room = usize::try_from(limit.rlim_cur)
        .unwrap_or(usize::MAX)
        .saturating_sub(256)
        .max(16);
    if room < wanted {
        tracing::warn!(
            wanted,
            allowed = room,
            "the open-files limit (ulimit -n) caps connections below --max-connections"
        );
    }
    wanted.min(room)
}

/// One open connection counted against its address group and the total; uncounted on drop.
struct AddressSlot {
    open: Arc<Mutex<Open>>,
    group: IpAddr,
}

impl AddressSlot {
    fn take(
        open: &Arc<Mutex<Open>>,
        ip: IpAddr,
        max_per_address: usize,
        max_total: usize,
    ) -> Result<Self, Full> {
        let mut open_now = open.lock().unwrap_or_else(|p| p.into_inner());
        if open_now.total >= max_total {
            return Err(Full::Server);
        }
        let group = group(ip);
        let n = open_now.per_group.entry(group).or_insert(0);
        if *n >= max_per_address {
            return Err(Full::Address);
        }
        *n += 1;
        open_now.total += 1;
        Ok(AddressSlot {
            open: open.clone(),
            group,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_group.get_mut(&self.group) {
            *n -= 1;
            if *n == 0 {
                open.per_group.remove(&self.group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_counted_per_address() {
        let open = Arc::new(Mutex::new(Open::default()));
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = AddressSlot::take(&open, a, 2, 100).unwrap();
        let _second = AddressSlot::take(&open, a, 2, 100).unwrap();
        assert_eq!(
            AddressSlot::take(&open, a, 2, 100).err(),
            Some(Full::Address)
        );
        assert!(AddressSlot::take(&open, b, 2, 100).is_ok());
        drop(first);
        assert!(AddressSlot::take(&open, a, 2, 100).is_ok());
    }

    #[test]
    fn many_addresses_meet_the_global_cap_and_ipv6_counts_by_its_64() {
        let open = Arc::new(Mutex::new(Open::default()));
        let mut held = Vec::new();
        for i in 0..4u8 {
            held.push(AddressSlot::take(&open, [10, 0, 0, i].into(), 8, 4).unwrap());
        }
        let other: IpAddr = [10, 0, 1, 1].into();
        assert_eq!(
            AddressSlot::take(&open, other, 8, 4).err(),
            Some(Full::Server)
        );
        held.pop();
        let _again = AddressSlot::take(&open, other, 8, 4).unwrap();
        // Two addresses of one /64 share a count; another /64 has its own.
        let open = Arc::new(Mutex::new(Open::default()));
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let two: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _x = AddressSlot::take(&open, one, 1, 100).unwrap();
        assert_eq!(
            AddressSlot::take(&open, two, 1, 100).err(),
            Some(Full::Address)
        );
        assert!(AddressSlot::take(&open, elsewhere, 1, 100).is_ok());
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert_eq!(group(mapped), IpAddr::from([10, 1, 2, 3]));
    }
}
