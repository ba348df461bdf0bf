//! The inactivity timeout of a connection, counted only while the server waits for its
//! client: for a request (head or next keep-alive request), for request body bytes the
//! handler asked for, or for room to write an answer. A handler that computes for minutes
//! with nothing to send keeps its connection, and its client gets the answer.
//!
//! The connection's stream ([`Inactivity`]) and its requests' bodies share an
//! [`Activity`]: requests being handled, and those of them whose handler waits on a body
//! read. While a request is handled and its handler does not wait on the body, a read that
//! waits (hyper keeps one pending to see the client hang up) does not count.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// What one connection's requests are doing (shared by its stream and its bodies).
#[derive(Debug, Default)]
pub struct Activity {
    /// Requests whose answer has not been sent whole.
    handling: AtomicUsize,
    /// Of those, the ones whose handler waits for request body bytes.
    reading: AtomicUsize,
    /// Bumped at each change of the two, so that the timer starts afresh.
    changes: AtomicU64,
}

impl Activity {
    /// Whether the server, when a read waits, is waiting on its client.
    fn waits_on_client(&self) -> bool {
        self.handling.load(Ordering::SeqCst) == 0 || self.reading.load(Ordering::SeqCst) > 0
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// A request starts being handled; it is until the guard (kept by its answer's body)
    /// drops.
    pub fn handling(self: &Arc<Self>) -> Handling {
        self.handling.fetch_add(1, Ordering::SeqCst);
        self.changed();
        Handling(self.clone())
    }
}

/// One request being handled (see [`Activity::handling`]).
#[derive(Debug)]
pub struct Handling(Arc<Activity>);

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.handling.fetch_sub(1, Ordering::SeqCst);
        self.0.changed();
    }
}

/// A request body that tells its connection's [`Activity`] when its handler waits on it.
pub struct ClientBody<B> {
    inner: B,
    activity: Arc<Activity>,
    waiting: bool,
}

impl<B> ClientBody<B> {
    pub fn new(inner: B, activity: Arc<Activity>) -> Self {
        ClientBody {
            inner,
            activity,
            waiting: false,
        }
    }

    fn set_waiting(&mut self, waiting: bool) {
        if self.waiting == waiting {
            return;
        }
        self.waiting = waiting;
        match waiting {
            true => self.activity.reading.fetch_add(1, Ordering::SeqCst),
            false => self.activity.reading.fetch_sub(1, Ordering::SeqCst),
        };
        self.activity.changed();
    }
}

impl<B> Drop for ClientBody<B> {
    fn drop(&mut self) {
        self.set_waiting(false);
    }
}

impl<B: HttpBody + Unpin> HttpBody for ClientBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        this.set_waiting(polled.is_pending());
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body holding its request's [`Handling`] until it is sent whole (or dropped).
pub struct AnswerBody<B> {
    inner: B,
    _handling: Handling,
}

impl<B> AnswerBody<B> {
    pub fn new(inner: B, handling: Handling) -> Self {
        AnswerBody {
            inner,
            _handling: handling,
        }
    }
}

impl<B: HttpBody + Unpin> HttpBody for AnswerBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A stream that fails with `TimedOut` once the server has waited `idle` on its client
/// (see the module comment): a silent client, a stalled body, or a client that stopped
/// reading.
pub struct Inactivity<S> {
    inner: S,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    activity: Arc<Activity>,
    /// The activity's change count when the deadline was last set.
    seen: u64,
}

impl<S> Inactivity<S> {
    pub fn new(inner: S, idle: Duration, activity: Arc<Activity>) -> Self {
        let seen = activity.changes.load(Ordering::SeqCst);
        Inactivity {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            activity,
            seen,
        }
    }

    fn progressed(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + self.idle);
    }

    /// After the inner stream said Pending: an error once the deadline has passed while
    /// waiting on the client (the sleep is then polled, so the task wakes up when it does).
    /// A change of what the requests do restarts the timer: time spent handling them is not
    /// the client's.
    fn expired(&mut self, cx: &mut Context<'_>, reading: bool) -> Option<io::Error> {
        let changes = self.activity.changes.load(Ordering::SeqCst);
        if changes != self.seen {
            self.seen = changes;
            self.progressed();
        }
        if reading && !self.activity.waits_on_client() {
            return None;
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Some(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("waited {} s on the client", self.idle.as_secs_f32()),
            )),
            Poll::Pending => None,
        }
    }

    /// Accounts for a write of the inner stream: bytes written are progress; a write that
    /// waits fails once the deadline has passed.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.progressed();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.expired(cx, false) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Inactivity<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.progressed();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.expired(cx, true) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Inactivity<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        this.after_write(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn pair(idle: Duration, activity: Arc<Activity>) -> (TcpStream, Inactivity<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, Inactivity::new(server, idle, activity))
    }

    #[tokio::test]
    async fn a_silent_peer_times_out_and_traffic_keeps_a_connection_alive() {
        let (mut client, mut server) =
            pair(Duration::from_millis(300), Arc::new(Activity::default())).await;
        let mut buf = [0u8; 4];
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            client.write_all(b"x").await.unwrap();
            assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        }
        let started = std::time::Instant::now();
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(250));
    }

    #[tokio::test]
    async fn time_spent_handling_is_not_counted_but_waiting_for_a_body_is() {
        let activity = Arc::new(Activity::default());
        let (mut client, mut server) = pair(Duration::from_millis(200), activity.clone()).await;
        let mut buf = [0u8; 4];
        // A request in hand, its handler busy: a waiting read outlasts the timeout.
        let handling = activity.handling();
        let read = tokio::time::timeout(Duration::from_millis(600), server.read(&mut buf)).await;
        assert!(read.is_err(), "the read waited without failing: {read:?}");
        // Its handler now waits for body bytes the client does not send.
        let mut body = ClientBody::new(
            http_body_util::Empty::<bytes::Bytes>::new(),
            activity.clone(),
        );
        body.set_waiting(true);
        let started = std::time::Instant::now();
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(150));
        drop((body, handling));
        client.write_all(b"x").await.unwrap();
    }
}
