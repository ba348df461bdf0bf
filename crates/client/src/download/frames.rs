//! Exact runs of bytes out of a stream of frames (an HTTP body, a file read in blocks, one
//! buffer), without copying the runs that lie inside one frame.
//!
//! An HTTP body arrives in frames of up to a few hundred KiB (hyper hands over what each
//! socket read brought), and a chunk record is about 64 KiB: most records lie inside one
//! frame and become slices of it, sharing its buffer. Only a record that spans frames is
//! copied into a buffer of its own. A slice keeps its whole frame alive until it is dropped,
//! so what a download holds in its queues is at most the frames those chunks came from.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

/// Why a run could not be read.
#[derive(Debug)]
pub enum FrameError {
    /// The stream failed.
    Io(std::io::Error),
    /// The stream ended after `got` of the `wanted` bytes.
    Ended { got: usize, wanted: usize },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::Ended { got, wanted } => {
                write!(f, "the stream ended after {got} of {wanted} bytes")
            }
        }
    }
}

/// A stream of frames read as a sequence of bytes.
pub struct Frames<S> {
    stream: S,
    /// What is left of the frame being read.
    current: Bytes,
}

impl<S> Frames<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    pub fn new(stream: S) -> Self {
        Frames {
            stream,
            current: Bytes::new(),
        }
    }

    /// Makes `current` non-empty; false at the end of the stream.
    async fn fill(&mut self) -> Result<bool, FrameError> {
        while self.current.is_empty() {
            match self.stream.next().await {
                Some(frame) => self.current = frame.map_err(FrameError::Io)?,
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// The next `n` bytes: a slice of the current frame when they lie inside it, else a copy
    /// gathered from as many frames as they span.
    pub async fn take(&mut self, n: usize) -> Result<Bytes, FrameError> {
        if n == 0 {
            return Ok(Bytes::new());
        }
        if !self.fill().await? {
            return Err(FrameError::Ended { got: 0, wanted: n });
        }
        if self.current.len() >= n {
            return Ok(self.current.split_to(n));
        }
        // `n` is at most the length the caller checked against what the stream holds.
        let mut run = BytesMut::with_capacity(n);
        while run.len() < n {
            if !self.fill().await? {
                let got = run.len();
                return Err(FrameError::Ended { got, wanted: n });
            }
            let part = (n - run.len()).min(self.current.len());
            run.extend_from_slice(&self.current.split_to(part));
        }
        Ok(run.freeze())
    }
}

/// One buffer as a stream of one frame.
pub fn one_frame(data: Bytes) -> impl Stream<Item = std::io::Result<Bytes>> + Unpin {
    futures::stream::iter([Ok(data)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(parts: &[&[u8]]) -> Frames<impl Stream<Item = std::io::Result<Bytes>> + Unpin> {
        let parts: Vec<_> = parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p)))
            .collect();
        Frames::new(futures::stream::iter(parts))
    }

    #[tokio::test]
    async fn runs_inside_a_frame_share_it_and_runs_across_frames_are_whole() {
        let mut f = frames(&[b"abcdef", b"", b"gh", b"ijklmnop"]);
        let first = f.take(4).await.unwrap();
        assert_eq!(&first[..], b"abcd");
        assert_eq!(f.current.len(), 2, "sliced from the frame, not copied out");
        assert_eq!(
            &f.take(6).await.unwrap()[..],
            b"efghij",
            "across three frames"
        );
        assert_eq!(&f.take(0).await.unwrap()[..], b"");
        assert_eq!(&f.take(6).await.unwrap()[..], b"klmnop");
        assert!(matches!(
            f.take(1).await,
            Err(FrameError::Ended { got: 0, wanted: 1 })
        ));
    }

    #[tokio::test]
    async fn a_stream_that_ends_early_says_how_much_it_gave() {
        let mut f = frames(&[b"abc", b"de"]);
        let err = f.take(9).await.unwrap_err();
        assert!(matches!(err, FrameError::Ended { got: 5, wanted: 9 }));
        assert_eq!(err.to_string(), "the stream ended after 5 of 9 bytes");
    }

    #[tokio::test]
    async fn a_failing_stream_passes_its_error_on() {
        let parts = vec![
            Ok(Bytes::from_static(b"ab")),
            Err(std::io::Error::other("connection reset")),
        ];
        let mut f = Frames::new(futures::stream::iter(parts));
        assert!(
            matches!(f.take(4).await, Err(FrameError::Io(e)) if e.to_string() == "connection reset")
        );
    }
}
