//! Progress reporting: a callback the caller supplies (the transfer agent turns it into
//! git-lfs `progress` events; the programs into bars). The client
//! itself never prints.

use std::sync::Arc;

/// Called with (bytes done so far, total bytes) of one file. Calls are frequent (every few
/// chunks); keep the callback cheap.
pub type ProgressFn = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// Calls the callback at most every `step` bytes (and always at the end).
pub struct Throttled {
    callback: Option<ProgressFn>,
    total: u64,
    last: u64,
    step: u64,
}

impl Throttled {
    pub fn new(callback: Option<ProgressFn>, total: u64) -> Self {
        Throttled {
            callback,
            total,
            last: 0,
            step: 1 << 20,
        }
    }

    pub fn update(&mut self, done: u64) {
        if let Some(cb) = &self.callback {
            if done >= self.last + self.step || (done == self.total && done != self.last) {
                self.last = done;
                cb(done, self.total);
            }
        }
    }

    pub fn finish(&mut self) {
        if let Some(cb) = &self.callback {
            if self.last != self.total || self.total == 0 {
                self.last = self.total;
                cb(self.total, self.total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn throttles_and_always_reports_the_end() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let cb: ProgressFn = Arc::new(move |d, t| s.lock().unwrap().push((d, t)));
        let total = 5 << 20;
        let mut p = Throttled::new(Some(cb), total);
        for done in (0..=total).step_by(64 * 1024) {
            p.update(done);
        }
        p.finish();
        let seen = seen.lock().unwrap();
        assert!(seen.len() <= 6, "{seen:?}");
        assert_eq!(seen.last(), Some(&(total, total)));
    }
}
