//! The answer channel to git-lfs (stdout) and `progress` events.
//!
//! Every answer is one line, written and flushed under a lock, so progress reported from
//! the client engine's worker threads never interleaves with other answers.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::pointer::Oid;
use crate::protocol::Answer;

/// Where answers go: stdout in production, a buffer in tests. Cheap to clone.
#[derive(Clone)]
pub struct AnswerSink {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl AnswerSink {
    pub fn new(out: impl Write + Send + 'static) -> AnswerSink {
        AnswerSink {
            out: Arc::new(Mutex::new(Box::new(out))),
        }
    }

    /// Writes one answer line and flushes it.
    pub fn send(&self, answer: &Answer) -> std::io::Result<()> {
        let line = answer.to_line();
        tracing::trace!(answer = line.trim_end(), "to git-lfs");
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.write_all(line.as_bytes())?;
        out.flush()
    }
}

/// How often progress is reported at most: often enough for a live bar, rarely enough that
/// a fast transfer is not slowed by JSON on a pipe.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

struct State {
    so_far: u64,
    reported: u64,
    last_report: Option<Instant>,
    error: Option<std::io::Error>,
}

/// Progress of one object. Cheap to clone and `Sync`, so the client engine may report from
/// any thread. Reports are monotonic, never exceed the object's size, and
/// [`Progress::finish`] makes the last one equal the size, as the protocol requires.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Inner>,
}

struct Inner {
    sink: AnswerSink,
    oid: Oid,
    size: u64,
    state: Mutex<State>,
}

impl Progress {
    pub fn new(sink: AnswerSink, oid: &Oid, size: u64) -> Progress {
        Progress {
            inner: Arc::new(Inner {
                sink,
                oid: *oid,
                size,
                state: Mutex::new(State {
                    so_far: 0,
                    reported: 0,
                    last_report: None,
                    error: None,
                }),
            }),
        }
    }

    pub fn size(&self) -> u64 {
        self.inner.size
    }

    /// Records that `bytes_so_far` bytes are done (values below an earlier one are ignored).
    pub fn set(&self, bytes_so_far: u64) {
        let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        st.so_far = st.so_far.max(bytes_so_far.min(self.inner.size));
        let due = st.last_report.is_none_or(|t| t.elapsed() >= MIN_INTERVAL);
        if due && st.so_far > st.reported {
            self.report(&mut st);
        }
    }

    /// Records `delta` more bytes done.
    pub fn add(&self, delta: u64) {
        let so_far = {
            let st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
            st.so_far.saturating_add(delta)
        };
        self.set(so_far);
    }

    /// Sends the final report (`bytesSoFar` = size) unless it was sent already. Returns the
    /// first error writing to git-lfs, if any happened.
    pub fn finish(&self) -> std::io::Result<()> {
        let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        st.so_far = self.inner.size;
        if st.reported < self.inner.size || st.last_report.is_none() {
            self.report(&mut st);
        }
        match st.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn report(&self, st: &mut State) {
        let since_last = st.so_far - st.reported;
        if let Err(e) =
            self.inner
                .sink
                .send(&Answer::progress(&self.inner.oid, st.so_far, since_last))
        {
            st.error.get_or_insert(e);
        }
        st.reported = st.so_far;
        st.last_report = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    pub struct Shared(pub Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn reports(buf: &Shared) -> Vec<(u64, u64)> {
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["bytesSoFar"].as_u64().unwrap(),
                    v["bytesSinceLast"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn reports_are_monotonic_bounded_and_end_at_the_size() {
        let buf = Shared::default();
        let p = Progress::new(AnswerSink::new(buf.clone()), &Oid([0xab; 32]), 1000);
        p.set(10); // first report goes out at once
        p.set(5); // never backwards
        p.add(20_000); // clamped to the size
        p.finish().unwrap();
        let r = reports(&buf);
        assert_eq!(r.first(), Some(&(10, 10)));
        assert_eq!(r.last().unwrap().0, 1000);
        assert!(r.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(r.iter().map(|x| x.1).sum::<u64>(), 1000);
    }

    #[test]
    fn an_empty_object_still_gets_one_final_report() {
        let buf = Shared::default();
        let p = Progress::new(AnswerSink::new(buf.clone()), &Oid([0xab; 32]), 0);
        p.finish().unwrap();
        p.finish().unwrap();
        assert_eq!(reports(&buf), vec![(0, 0)]);
    }
}
