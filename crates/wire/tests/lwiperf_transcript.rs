//! lwIP lwiperf against netchar's iperf2 codec, in memory, both roles.
//!
//! The transcripts are built from lwiperf's wire format as lwIP's `src/apps/lwiperf/lwiperf.c`
//! (lwip-tcpip/lwip) writes it: its client sends the 24-byte settings (`flags`, `num_threads`
//! 1, `remote_port` 5001, `buffer_len` 0, `win_band` 0, `amount` −1000, big-endian) twice,
//! then its constant "0123456789" buffer from offset 48 % 10, the first data write
//! TCP_MSS − 24 bytes. Its server (`lwiperf_tcp_recv`) takes a header from the first segment
//! (the rest of that segment is not counted), strips a header from every segment that starts
//! where its byte counter minus 24 is a multiple of 128 KiB (the second segment included),
//! compares those with the first only when the "answer" flag (bit 31) is set, and aborts on a
//! segment shorter than 24 bytes at such a point. [`LwiperfServer`] below models those rules
//! (written from the description, not lwIP's code) to check what netchar's client sends.

use netchar_wire::iperf2::{lwiperf, Amount, ClientHeader, DialBack};

const TCP_MSS: usize = 536;

/// lwiperf's client settings for its three modes (LWIPERF_CLIENT, _DUAL, _TRADEOFF).
fn lwiperf_settings(flags: u32) -> [u8; 24] {
    let mut s = [0u8; 24];
    let words = [flags, 1, 5001, 0, 0, (-1000i32) as u32];
    for (i, w) in words.iter().enumerate() {
        s[4 * i..4 * i + 4].copy_from_slice(&w.to_be_bytes());
    }
    s
}

/// The first bytes an lwiperf client writes: header, header, then its pattern.
fn lwiperf_client_transcript(flags: u32, data: usize) -> Vec<u8> {
    let h = lwiperf_settings(flags);
    let mut out = [h, h].concat();
    out.extend((48..48 + data).map(|i| b"0123456789"[i % 10]));
    out
}

#[test]
fn an_lwiperf_clients_header_reads_as_iperf2_settings() {
    for (flags, dial_back, len) in
        [(0u32, None, 4), (0x8000_0001, Some(DialBack::Dual), 24), (0x8000_0000, Some(DialBack::Tradeoff), 24)]
    {
        let t = lwiperf_client_transcript(flags, TCP_MSS - 24);
        let (h, taken) = ClientHeader::decode(&t).unwrap().unwrap();
        assert_eq!(taken, len, "flags {flags:#x}: a 2.1 server's header rule");
        assert_eq!(h.dial_back(), dial_back);
        if flags != 0 {
            assert_eq!(h.amount(), Amount::Seconds(10.0));
            assert_eq!(h.port, 5001);
            assert_eq!(h.num_threads, 1);
        }
        // The header goes out twice: the second copy is the first's bytes.
        assert_eq!(t[..24], t[24..48]);
        assert_eq!(&t[48..52], b"8901");
    }
}

/// lwiperf's TCP receive rules (see the module comment).
#[derive(Default)]
struct LwiperfServer {
    settings: Option<[u8; 24]>,
    /// lwiperf's byte counter.
    bytes: u64,
    aborted: bool,
}

impl LwiperfServer {
    fn segment(&mut self, seg: &[u8]) {
        if self.aborted {
            return;
        }
        let at_check = self.settings.is_none() || (self.bytes >= 24 && (self.bytes - 24).is_multiple_of(128 * 1024));
        let mut data = seg;
        if at_check {
            if seg.len() < 24 {
                self.aborted = true;
                return;
            }
            match self.settings {
                None => {
                    self.settings = Some(seg[..24].try_into().unwrap());
                    self.bytes += 24;
                    // The rest of the first segment is not counted.
                    return;
                }
                Some(s) => {
                    if s[0] & 0x80 != 0 && seg[..24] != s {
                        self.aborted = true;
                        return;
                    }
                    self.bytes += 24;
                    data = &seg[24..];
                }
            }
        }
        self.bytes += data.len() as u64;
    }
}

/// What netchar's client writes to an lwiperf server: its preamble, then netchar's pattern.
fn netchar_stream(total: usize) -> Vec<u8> {
    let mut out = lwiperf::client_preamble(Amount::Seconds(10.0), 5001);
    out.extend((0..total).map(|i| b"0123456789"[i % 10]));
    out
}

#[test]
fn netchars_client_runs_against_lwiperfs_server_rules() {
    // netchar writes its preamble as its own write (TCP_NODELAY or not, the 48 bytes come
    // first); segments after that follow the MSS.
    let stream = netchar_stream(1_000_000);
    for first in [24usize, 48] {
        let mut server = LwiperfServer::default();
        server.segment(&stream[..first]);
        if first == 24 {
            server.segment(&stream[24..48]);
        }
        let mut at = 48;
        while at < stream.len() {
            let end = (at + 1448).min(stream.len());
            // Segments are cut at the MSS from the data's start: none starts exactly at a
            // check point past 48 with fewer than 24 bytes.
            server.segment(&stream[at..end]);
            at = end;
        }
        assert!(!server.aborted, "first segment {first} bytes");
        // What lwiperf counts: every byte but the first segment's tail. netchar writes its
        // 48-byte preamble at once: lwiperf counts 24 of them, then takes the next 24 data
        // bytes for the second header (stripped, counted as 24): 24 fewer in all.
        let uncounted = if first == 48 { 24 } else { 0 };
        assert_eq!(server.bytes, stream.len() as u64 - uncounted, "first segment {first} bytes");
    }
}

#[test]
fn the_flags_netchar_sends_never_trigger_lwiperfs_header_comparison() {
    let p = lwiperf::client_preamble(Amount::Seconds(10.0), 5001);
    // Flags 0: no dial-back, and the check points only strip 24 bytes, never compare them.
    assert_eq!(&p[..4], &[0, 0, 0, 0]);
    let mut server = LwiperfServer::default();
    server.segment(&p[..24]);
    // A check point whose segment carries data instead of a header is not an error with flags 0.
    server.segment(&[b'5'; 100]);
    assert!(!server.aborted);
    // lwiperf's own DUAL client at the same point would be compared and aborted.
    let mut dual = LwiperfServer::default();
    dual.segment(&lwiperf_settings(0x8000_0001));
    dual.segment(&[b'5'; 100]);
    assert!(dual.aborted);
}
