//! git's pkt-line framing (gitprotocol-common(5)) as the long-running filter protocol uses
//! it: a 4-digit hex length that counts itself, then the payload; `0000` is a flush.
//!
//! The framing (headers, flush, length checks) is gix-packetline's. Kept here: the filter
//! protocol's rules on top of it (only flush is special, where the input may end, how long a
//! list may be) and the payload paths the crate has no API for: content read straight into
//! packet frames, and file pages spliced into git's pipe (see [`PktWriter::copy_file`]).

mod read;
mod write;

pub use read::{Packet, PktReader};
pub use write::PktWriter;

use std::io::Write;

use gix_packetline::blocking_io::encode;

use crate::GitError;

/// The largest packet, header included.
pub const MAX_PACKET: usize = 65520;
/// The largest payload of one packet.
pub const MAX_DATA: usize = MAX_PACKET - 4;

fn protocol(msg: impl Into<String>) -> GitError {
    GitError::FilterProtocol(msg.into())
}

/// As many zero bytes as one packet carries: the length a spliced packet's header is
/// computed from, and the filler that keeps the stream whole when a file fails mid-packet.
static ZEROS: [u8; MAX_DATA] = [0; MAX_DATA];

/// The header of a data packet carrying `payload`, by gix-packetline's encoder (which
/// refuses empty and oversize payloads). The encoder writes header and payload together;
/// the payload is not copied here, as the caller has it in place or splices it.
fn header(payload: &[u8]) -> Result<[u8; 4], GitError> {
    let mut sink = HeaderOnly {
        header: [0; 4],
        filled: 0,
    };
    encode::data_to_write(payload, &mut sink).map_err(|e| {
        protocol(format!(
            "cannot frame {} bytes as one packet: {e}",
            payload.len()
        ))
    })?;
    Ok(sink.header)
}

/// Keeps the first four bytes written (the header) and accepts the rest unread.
struct HeaderOnly {
    header: [u8; 4],
    filled: usize,
}

impl Write for HeaderOnly {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let take = (self.header.len() - self.filled).min(buf.len());
        self.header[self.filled..self.filled + take].copy_from_slice(&buf[..take]);
        self.filled += take;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_count_themselves_and_refuse_what_git_would() {
        assert_eq!(&header(b"a").unwrap(), b"0005");
        assert_eq!(&header(&ZEROS[..0x1234]).unwrap(), b"1238");
        assert_eq!(&header(&ZEROS).unwrap(), b"fff0");
        // gix-packetline's limit is git's, and this module's.
        assert_eq!(format!("{MAX_PACKET:04x}").as_bytes(), b"fff0");
        assert!(header(&[0; MAX_DATA + 1]).is_err());
        assert!(header(b"").is_err());
    }
}
