//! What `migrate` tells the person running it while it works. The program shows it (a bar
//! with objects, bytes and rate on a terminal; one line per object otherwise); migrate
//! itself never prints.

/// Told as `migrate` goes. Called from the thread that runs `migrate` only.
pub trait Observer {
    /// One line about a step ("fetching 3 missing LFS objects from origin").
    fn step(&self, line: &str);
    /// The uploads begin: `objects` objects of `bytes` bytes in all.
    fn uploads_begin(&self, _objects: u64, _bytes: u64) {}
    /// One object is on the server (uploaded now, or found there): its size, and a line
    /// that says which and how.
    fn object_done(&self, _size: u64, _what: &str) {}
    /// The uploads ended, however they ended.
    fn uploads_end(&self) {}
}
