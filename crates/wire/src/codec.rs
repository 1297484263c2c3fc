//! Length-prefixed framing: a 4-byte big-endian length, then that many bytes of payload.
//!
//! The decoder is incremental (feed it whatever the socket gave, take out whole frames) and
//! checks the announced length against its cap before it buffers a byte of the payload, so a
//! hostile peer cannot make the server allocate more than the cap.

use crate::ProtocolError;

/// The largest frame a client may send to a server (test requests are small).
pub const MAX_CLIENT_FRAME: u32 = 64 * 1024;
/// The largest frame a server may send to a client (results of long, many-stream tests).
pub const MAX_SERVER_FRAME: u32 = 64 * 1024 * 1024;

/// Appends one frame holding `payload` to `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Reassembles frames from a byte stream.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    max: u32,
}

impl FrameDecoder {
    /// A decoder that rejects frames longer than `max` bytes.
    pub fn new(max: u32) -> Self {
        Self { buf: Vec::new(), max }
    }

    /// Adds bytes read from the connection.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Takes out the next whole frame, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ProtocolError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len > self.max {
            return Err(ProtocolError::Oversize { len, max: self.max });
        }
        let end = 4 + len as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        let frame = self.buf[4..end].to_vec();
        self.buf.drain(..end);
        Ok(Some(frame))
    }

    /// Bytes buffered but not yet returned as a frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_frame() {
        let mut out = Vec::new();
        encode_frame(b"{}", &mut out);
        assert_eq!(out, [0, 0, 0, 2, b'{', b'}']);
    }

    #[test]
    fn oversize_is_rejected_from_the_header_alone() {
        let mut d = FrameDecoder::new(16);
        d.push(&[0, 0, 0, 17]);
        assert_eq!(d.next_frame(), Err(ProtocolError::Oversize { len: 17, max: 16 }));
    }

    #[test]
    fn frames_split_anywhere_reassemble() {
        let mut wire = Vec::new();
        encode_frame(b"hello", &mut wire);
        encode_frame(b"", &mut wire);
        encode_frame(b"world!", &mut wire);
        let mut d = FrameDecoder::new(100);
        let mut got = Vec::new();
        for b in &wire {
            d.push(std::slice::from_ref(b));
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), vec![], b"world!".to_vec()]);
        assert_eq!(d.pending(), 0);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic_or_exceed_the_cap(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut d = FrameDecoder::new(1024);
            for c in chunks {
                d.push(&c);
                while let Ok(Some(f)) = d.next_frame() {
                    prop_assert!(f.len() <= 1024);
                }
            }
        }
    }
}
