//! A large missing object handed to git while it downloads (see [`super::Filter`]'s
//! `stream`): the pieces go to git as they are written, and on a terminal the user sees
//! which file is coming and how far it got (through [`super::Downloads`]).

use std::io::Write;

use crate::filter::pktline::PktWriter;
use crate::GitError;
use git_xet_client::ContentTap;

/// Closes the tap when dropped, however the fetch ends.
pub(super) struct CloseOnDrop<'a>(pub(super) &'a ContentTap);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Sends streamed pieces to git as content of a successful answer (the status goes first,
/// with the first piece). Returns whether anything was sent. A broken pipe to git is
/// returned only after the stream ended: the download must never wait on a reader that
/// stopped.
pub(super) fn forward<W: Write>(
    pieces: std::sync::mpsc::Receiver<bytes::Bytes>,
    output: &mut PktWriter<W>,
) -> Result<bool, GitError> {
    let mut started = false;
    let mut broken = None;
    for piece in pieces {
        if broken.is_some() {
            continue;
        }
        let sent = if started {
            output.data(&piece)
        } else {
            started = true;
            output
                .line("status=success")
                .and_then(|_| output.flush_packet())
                .and_then(|_| output.data(&piece))
        };
        broken = sent.err();
    }
    broken.map_or(Ok(started), Err)
}
