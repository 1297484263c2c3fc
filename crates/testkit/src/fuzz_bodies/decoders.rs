//! Byte-input bodies: each decoder fed anything, and the valid inputs mutations start from.

use super::script::*;
use netchar_model::TestSpec;
use netchar_wire::auth::{self, KeyTable, MIN_SECRET_LEN};
use netchar_wire::codec::{encode_frame, FrameDecoder};
use netchar_wire::datagram::{
    self, DatagramFormat, DatagramHeader, NativeFormat, Received, CHALLENGE_LEN, HEADER_LEN, SETUP_LEN,
};
use netchar_wire::hello::{identify_peer, Hello, HELLO_LEN, MAGIC};
use netchar_wire::message::{cookie_from_hex, cookie_to_hex, ClientMessage, ServerMessage};
use netchar_wire::ProtocolError;

/// Longest description `identify_peer` may give, whatever arrived: it goes into one error line.
const MAX_PEER_DESCRIPTION: usize = 256;

/// The hello: `identify_peer` takes any length and says something short; the first 40 bytes
/// (zero-padded) decode exactly when they carry the magic and a known role, and a decoded
/// hello re-encodes to the same bytes.
pub fn hello(data: &[u8]) {
    let peer = identify_peer(data);
    assert!(!peer.is_empty() && peer.len() <= MAX_PEER_DESCRIPTION, "{} bytes describe the peer", peer.len());
    let mut raw = [0u8; HELLO_LEN];
    let n = data.len().min(HELLO_LEN);
    raw[..n].copy_from_slice(&data[..n]);
    let magic = raw[..MAGIC.len()] == MAGIC;
    match Hello::decode(&raw) {
        Ok(h) => {
            assert!(magic, "a hello without the magic decoded");
            assert_eq!(h.encode(), raw, "a decoded hello re-encodes to other bytes");
        }
        Err(ProtocolError::NotNetchar(why)) => {
            assert!(!magic, "a hello with the magic is called foreign");
            assert_eq!(why, identify_peer(&raw));
        }
        Err(ProtocolError::Malformed(_)) => assert!(magic && raw[10] > 2, "a valid hello was refused"),
        Err(e) => panic!("a hello cannot fail with {e:?}"),
    }
}

/// Chunks of a control connection's byte stream, and the decoder's cap.
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[derive(Debug, Clone)]
pub struct FrameInput {
    /// The decoder's cap in bytes.
    pub cap: u16,
    /// What each read from the socket returned.
    pub chunks: Vec<Vec<u8>>,
}

/// Framing: fed any chunks, the decoder returns exactly the frames the stream holds, in order,
/// never one over its cap; it never holds more than one capped frame and its header; and an
/// oversize length is refused from the header alone, for good.
pub fn frame(input: &FrameInput) {
    let cap = u32::from(input.cap);
    let mut d = FrameDecoder::new(cap);
    let mut stream = Vec::new();
    let mut taken = 0usize;
    for chunk in &input.chunks {
        d.push(chunk);
        stream.extend_from_slice(chunk);
        loop {
            match d.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.len() <= cap as usize, "a frame of {} bytes passed a cap of {cap}", f.len());
                    let mut framed = Vec::new();
                    encode_frame(&f, &mut framed);
                    assert_eq!(stream[taken..taken + framed.len()], framed[..], "the frame is not what was sent");
                    taken += framed.len();
                }
                Ok(None) => break,
                Err(ProtocolError::Oversize { len, max }) => {
                    assert!(max == cap && len > cap, "{len} bytes refused against a cap of {cap}");
                    assert_eq!(stream[taken..taken + 4], len.to_be_bytes(), "the refused length is not the header's");
                    assert_eq!(d.next_frame(), Err(ProtocolError::Oversize { len, max }), "a refused frame came back");
                    return;
                }
                Err(e) => panic!("framing cannot fail with {e:?}"),
            }
        }
        assert_eq!(d.pending(), stream.len() - taken, "bytes lost or invented");
        assert!(d.pending() < 4 + cap as usize, "{} bytes held for a cap of {cap}", d.pending());
    }
}

/// Control messages: decoding never panics; what decodes re-encodes and decodes equal; the hex
/// fields take exactly 32 (cookie) or 64 (proof) hex digits.
pub fn control_messages(data: &[u8]) {
    if let Ok(m) = ClientMessage::decode(data) {
        assert_eq!(ClientMessage::decode(&m.encode()).as_ref(), Ok(&m), "a client message changed on re-encoding");
        if let ClientMessage::Request { companion, auth, .. } = &m {
            companion.iter().for_each(|c| hex_fields(c));
            auth.iter().for_each(|a| [&a.nonce, &a.proof].into_iter().for_each(|h| hex_fields(h)));
        }
    }
    if let Ok(m) = ServerMessage::decode(data) {
        assert_eq!(ServerMessage::decode(&m.encode()).as_ref(), Ok(&m), "a server message changed on re-encoding");
        if let ServerMessage::Accepted { cookie, server_proof, .. } = &m {
            hex_fields(cookie);
            server_proof.iter().for_each(|p| hex_fields(p));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        hex_fields(text);
    }
}

/// A hex field decodes only if it is exactly the hex digits of what it decodes to.
fn hex_fields(text: &str) {
    if let Ok(c) = cookie_from_hex(text) {
        assert_eq!(cookie_to_hex(&c), text.to_ascii_lowercase(), "{text:?} is not 32 hex digits, yet a cookie");
    }
    if let Some(p) = auth::from_hex::<32>(text) {
        assert_eq!(auth::to_hex(&p), text.to_ascii_lowercase(), "{text:?} is not 64 hex digits, yet a proof");
    }
}

/// The UDP datagram header and the setup, confirm and challenge datagrams: each parses exactly
/// when its layout (docs in `datagram.rs`) says, round-trips, and a setup never earns a larger
/// challenge; the receivers' classification agrees with the parse.
pub fn datagram(data: &[u8]) {
    let netchar =
        data.len() >= HEADER_LEN && data[..2] == datagram::MAGIC.to_be_bytes() && data[2] == datagram::VERSION;
    let flags = if netchar { data[3] } else { 0 };
    match DatagramHeader::parse(data) {
        Ok(h) => {
            assert!(netchar, "a foreign datagram parsed");
            let mut b = [0u8; HEADER_LEN];
            h.emit(&mut b);
            assert_eq!(b, data[..HEADER_LEN], "a parsed header re-emits to other bytes");
            DatagramHeader::stamp(&mut b, !h.sequence, h.sent_ns.rotate_left(1));
            let stamped = DatagramHeader::parse(&b).expect("a stamped header parses");
            assert_eq!((stamped.sequence, stamped.sent_ns), (!h.sequence, h.sent_ns.rotate_left(1)));
            assert_eq!((stamped.flags, stamped.stream_id), (h.flags, h.stream_id), "stamp changed other fields");
        }
        Err(_) => assert!(!netchar, "a netchar header was refused"),
    }
    // What the UDP receivers make of it (datagram::NativeFormat, the native DatagramFormat).
    let format = NativeFormat;
    match format.classify(data) {
        Received::Foreign => assert!(!netchar, "a netchar datagram called foreign"),
        Received::Control => assert!(netchar && flags != 0, "data or foreign bytes called control"),
        Received::Data { stream_id, sequence, sent_ns } => {
            assert!(netchar && flags == 0, "a flagged or foreign datagram called data");
            let mut b = [0u8; HEADER_LEN];
            format.emit(&mut b, stream_id, sequence, sent_ns);
            assert_eq!(b, data[..format.header_len()], "data re-emits to other bytes");
        }
    }
    let setup = DatagramHeader::parse_setup(data);
    assert_eq!(DatagramHeader::setup_cookie(data), setup.map(|s| s.cookie));
    if let Some(s) = setup {
        assert!(netchar && flags & datagram::FLAG_SETUP != 0 && data.len() >= SETUP_LEN, "not a setup");
        assert_eq!(s.cookie, data[HEADER_LEN..HEADER_LEN + 16]);
        assert_eq!(s.confirm.is_some(), flags & datagram::FLAG_CONFIRM != 0);
        let again = match s.confirm {
            None => DatagramHeader::setup(s.stream_id, &s.cookie),
            Some((token, tag)) => DatagramHeader::confirm(s.stream_id, &s.cookie, &token, &tag),
        };
        assert_eq!(DatagramHeader::parse_setup(&again), Some(s));
        // No amplification: the answer to a setup is never larger than the setup.
        assert!(DatagramHeader::challenge(s.stream_id, &[0; 16]).len() <= data.len());
    }
    let challenge = DatagramHeader::parse_challenge(data);
    if let Some((id, token)) = challenge {
        assert!(netchar && flags & datagram::FLAG_CHALLENGE != 0 && data.len() >= CHALLENGE_LEN, "not a challenge");
        assert_eq!(token, data[HEADER_LEN..HEADER_LEN + 16]);
        assert_eq!(DatagramHeader::parse_challenge(&DatagramHeader::challenge(id, &token)), Some((id, token)));
    }
    if DatagramHeader::is_challenge(data) {
        let (id, token) = challenge.expect("an exact challenge parses as one");
        assert_eq!(data, DatagramHeader::challenge(id, &token), "only the server's exact bytes are a challenge");
    }
}

/// A key file (`--psk-file`): what parses holds only valid, distinct users with long enough
/// secrets, and errors name a line of the file.
pub fn key_file(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match auth::parse_key_file(text) {
        Ok(creds) => {
            assert!(!creds.is_empty());
            for (i, c) in creds.iter().enumerate() {
                let name_ok = c.user.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.@".contains(ch));
                assert!(name_ok && (1..=64).contains(&c.user.len()), "user {:?} accepted", c.user);
                assert!(c.secret.len() >= MIN_SECRET_LEN, "a {}-byte secret accepted", c.secret.len());
                assert!(creds[..i].iter().all(|o| o.user != c.user), "user {:?} twice", c.user);
            }
            let table = KeyTable::new(creds.clone());
            assert_eq!(table.len(), creds.len());
            assert!(creds.iter().all(|c| table.key(&c.user) == Some(&c.secret[..])));
        }
        Err(e) => assert!(e.line <= text.lines().count(), "error on line {} of {}", e.line, text.lines().count()),
    }
}

/// iperf3's control protocol, client side (netchar as an iperf3 client): whatever a peer
/// on port 5201 answers, in pieces whose sizes come from the data, the session never panics,
/// its output stays small (a cookie, a parameters JSON, state bytes, its results JSON), and an
/// ended session stays ended.
pub fn iperf3_client(data: &[u8]) {
    use netchar_wire::iperf3::{make_cookie, Client, Params};
    let now = std::time::Instant::now();
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let params = Params {
        udp: false,
        seconds: 1.0,
        bytes: 0,
        parallel: 2,
        len: 131_072,
        reverse: mode & 1 == 1,
        bidirectional: mode & 2 == 2,
        omit: 0.0,
        bandwidth: None,
        window: None,
        mss: None,
        nodelay: false,
        congestion: None,
        tos: None,
        dont_fragment: false,
    };
    let mut c = Client::new(now, params, make_cookie(&[mode; 36]));
    let mut out = Vec::new();
    let mut t = now;
    let mut was_done = false;
    while let Some((&n, tail)) = rest.split_first() {
        let take = usize::from(n % 17).min(tail.len());
        let (chunk, next) = tail.split_at(take);
        rest = next;
        match n % 5 {
            0 => c.local_senders_done(t, &[(1, u64::from(n), 1), (2, 7, 0)]),
            1 => {
                t += std::time::Duration::from_millis(u64::from(n) * 40);
                let _ = c.handle_timeout(t);
            }
            _ => {
                let _ = c.handle_input(t, chunk);
            }
        }
        while c.poll_event().is_some() {}
        out.clear();
        c.poll_output(&mut out);
        assert!(out.len() <= 64 * 1024, "{} bytes out for one step", out.len());
        if was_done {
            assert!(c.is_done() && out.is_empty(), "an ended iperf3 session came back to life");
        }
        was_done = c.is_done();
    }
}

/// iperf3's control protocol, server side (`netchar server --iperf3`): whatever a client sends
/// after its cookie, in pieces whose sizes come from the data, with the driver admitting,
/// refusing or finishing at steps the data chooses, the session never panics, buffers at most
/// its caps, writes little, and an ended session stays ended.
pub fn iperf3_server(data: &[u8]) {
    use netchar_wire::iperf3::server::{results_json, Event, Server};
    let now = std::time::Instant::now();
    let mut s = Server::new(now);
    let mut rest = data;
    let mut out = Vec::new();
    let mut t = now;
    let mut was_done = false;
    while let Some((&n, tail)) = rest.split_first() {
        let take = usize::from(n % 23).min(tail.len());
        let (chunk, next) = tail.split_at(take);
        rest = next;
        match n % 7 {
            0 => s.accept(t),
            1 => s.streams_connected(t),
            2 => {
                t += std::time::Duration::from_millis(u64::from(n) * 50);
                let _ = s.handle_timeout(t);
            }
            3 if n > 200 => s.deny(),
            _ => {
                let _ = s.handle_input(t, chunk);
            }
        }
        while let Some(ev) = s.poll_event() {
            if let Event::ClientResults(_) = ev {
                s.send_results(t, &results_json((0.0, 0.0, 0.0), -1, &[], None));
            }
        }
        out.clear();
        s.poll_output(&mut out);
        assert!(out.len() <= 64 * 1024, "{} bytes out for one step", out.len());
        if was_done {
            assert!(s.is_done() && out.is_empty(), "an ended iperf3 server session came back to life");
        }
        was_done = s.is_done();
    }
}

/// netio's server machine (`netchar server --netio`): whatever a client sends, in pieces whose
/// sizes come from the data, with the driver ending its sending or answering RES at steps the
/// data chooses, the machine never panics, holds at most a few messages while sending, writes
/// only CONTROL answers, and a closed connection stays closed.
pub fn netio_server(data: &[u8]) {
    use netchar_wire::netio::{Server, ServerEvent, CONTROL_LEN};
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let udp = mode & 1 == 1;
    let mut s = Server::new(udp);
    let mut out = Vec::new();
    let mut was_closed = false;
    let (mut sending, mut counting) = (false, false);
    while let Some((&n, tail)) = rest.split_first() {
        let take = usize::from(n % 23).min(tail.len());
        let (chunk, next) = tail.split_at(take);
        rest = next;
        // The driver ends a phase only when the machine asked for it.
        let r = match n % 5 {
            0 if sending && udp => s.udp_sent(u32::from(n)),
            0 if sending => s.sent(),
            1 if counting => s.udp_count(u32::from(n)),
            _ => s.handle_input(chunk),
        };
        if n % 5 == 0 && sending {
            sending = false;
        }
        if n % 5 == 1 && counting {
            counting = false;
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                ServerEvent::Send { .. } => sending = true,
                ServerEvent::CountRequested => counting = true,
                _ => {}
            }
        }
        out.clear();
        s.poll_output(&mut out);
        assert!(out.len() <= 6 * CONTROL_LEN && out.len() % CONTROL_LEN == 0, "{} bytes out for one step", out.len());
        if was_closed {
            assert!(s.is_closed() && out.is_empty(), "a closed netio connection came back to life");
        }
        was_closed = s.is_closed();
        if r.is_err() {
            // The driver closes the connection on an error.
            return;
        }
    }
    let _ = s.handle_eof();
}

/// netio's client machine (`netchar suite netio --proto netio`): whatever a server answers, in
/// pieces whose sizes come from the data, with the driver's Tx, Rx timeouts and UDP counts at
/// steps the data chooses, the machine never panics, writes at most a marker block and a
/// CONTROL message per step, records at most one result per size, and a finished run stays
/// finished.
pub fn netio_client(data: &[u8]) {
    use netchar_wire::netio::{Client, ClientStep, CONTROL_LEN, INTERVAL};
    let now = std::time::Instant::now();
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let sizes = [16u32, 1000];
    let mut c = Client::new(&sizes, mode & 1 == 1, mode & 2 == 2, INTERVAL);
    let mut t = now;
    let mut was_done = false;
    while let Some((&n, tail)) = rest.split_first() {
        let take = usize::from(n % 29).min(tail.len());
        let (chunk, next) = tail.split_at(take);
        rest = next;
        t += std::time::Duration::from_millis(u64::from(n));
        if let ClientStep::Write(b) = c.step(t) {
            assert!(b.len() <= 1000 + CONTROL_LEN, "{} bytes written at once", b.len());
        }
        match n % 4 {
            0 => c.transmitted(t, u64::from(n)),
            1 => c.receive_timed_out(t),
            2 => c.udp_received(u64::from(n), u64::from(n) * 16),
            _ => {
                if let Ok(used) = c.handle_input(t, chunk) {
                    assert!(used <= chunk.len());
                }
            }
        }
        assert!(c.results.len() <= sizes.len(), "{} results for {} sizes", c.results.len(), sizes.len());
        if was_done {
            assert!(c.is_done(), "a finished netio run came back to life");
        }
        was_done = c.is_done();
    }
}

/// Valid examples of what the byte-input body `target` decodes; empty for other targets.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let request = |spec: TestSpec| ClientMessage::Request {
        spec,
        client_version: "0.1.0".into(),
        companion: Some(cookie_to_hex(&[7; 16])),
        auth: proof_of(&ProofPick::Valid),
    };
    let specs = super::test_spec::seed_specs();
    match target {
        "netperf" => super::netperf::seeds(),
        "hello" => vec![
            Hello::control().encode().to_vec(),
            Hello::server_with_nonce([3; 16], true).encode().to_vec(),
            Hello::data_tagged([1; 16], 2, [3; 8]).encode().to_vec(),
            Hello::control().encode()[..12].to_vec(),
            b"SSH-2.0-OpenSSH_9.2".to_vec(),
        ],
        "control_messages" => {
            let mut out: Vec<Vec<u8>> = specs.iter().cloned().map(|s| request(s).encode()).collect();
            out.extend([ClientMessage::Start.encode(), ClientMessage::SenderDone { totals: totals(3) }.encode()]);
            out.extend(
                [
                    ServerPick::Accepted { cookie_ok: true, proof: ServerProofPick::Valid, data_port: Some(5301) },
                    ServerPick::Busy { reason: true },
                    ServerPick::Results { error: true },
                ]
                .iter()
                .map(|p| server_bytes(p)[4..].to_vec()),
            );
            out
        }
        "datagram" => {
            let mut data = [0u8; 64];
            DatagramHeader { flags: 0, stream_id: 2, sequence: 7, sent_ns: 1 << 40 }.emit(&mut data);
            vec![
                data.to_vec(),
                DatagramHeader::setup(1, &[9; 16]).to_vec(),
                DatagramHeader::confirm(1, &[9; 16], &[8; 16], &[7; 8]).to_vec(),
                DatagramHeader::challenge(1, &[8; 16]).to_vec(),
            ]
        }
        "iperf3_server" => iperf3_server_seeds(),
        "iperf3_client" => iperf3_client_seeds(),
        "netio_server" => netio_server_seeds(),
        "nc_test" => nc_test_seeds(),
        "netio_client" => {
            // A TCP run's first size: the Tx phase ends (4), the server's two blocks and marker
            // come (103 takes sixteen bytes when n % 4 is 3).
            let mut script = vec![0u8, 4];
            for first in [0u8, 0, 1] {
                script.push(103);
                script.push(first);
                script.extend([0x5a; 15]);
            }
            vec![script]
        }
        "spec" => specs.iter().map(|s| serde_json::to_vec_pretty(s).expect("specs serialise")).collect(),
        // A seed's index, then edits: field 17 (pattern burst) to EDGES[2] (1).
        "spec_fields" => (0..specs.len() as u8).map(|i| vec![i]).chain([vec![1, 17, 2]]).collect(),
        "key_file" => vec![
            b"# lab keys\nlab:0123456789abcdef\n\nci@build-1:e3b0c44298fc1c149afbf4c8996fb924\n".to_vec(),
            b"lab:short\n".to_vec(),
        ],
        "iperf2" => iperf2_seeds(),
        _ => Vec::new(),
    }
}

/// The `iperf3_server` body's seed: a whole UDP test as an iperf3 3.12 client sends it.
fn iperf3_server_seeds() -> Vec<Vec<u8>> {
    // A whole UDP test as an iperf3 3.12 client sends it: a step byte n takes n % 23
    // bytes of input when n % 7 is 4..6 (4: four bytes, 12: twelve), 0 admits, 1 says
    // the streams are in.
    let params = br#"{"udp":true,"omit":0,"time":1,"num":0,"blockcount":0,"parallel":1,"len":1400,"bandwidth":1048576,"pacing_timer":1000,"client_version":"3.12"}"#;
    let results = br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":1400,"retransmits":0,"jitter":0,"errors":0,"packets":1}]}"#;
    let mut script = vec![4u8];
    script.extend_from_slice(&(params.len() as u32).to_be_bytes());
    for piece in params.chunks(22) {
        // n = 22 + 7k with n % 23 = len: choose n with n % 7 >= 4 and n % 23 == len.
        let n = (0u8..=255).find(|n| n % 7 >= 4 && usize::from(n % 23) == piece.len()).unwrap_or(4);
        script.push(n);
        script.extend_from_slice(piece);
    }
    script.extend([0, 1, 5, 4]);
    script.extend_from_slice(&(results.len() as u32).to_be_bytes());
    for piece in results.chunks(22) {
        let n = (0u8..=255).find(|n| n % 7 >= 4 && usize::from(n % 23) == piece.len()).unwrap_or(4);
        script.push(n);
        script.extend_from_slice(piece);
    }
    script.extend([5, 16]);
    vec![script]
}

/// The `iperf3_client` body's seed: a whole upload as a scripted iperf3 server answers it.
fn iperf3_client_seeds() -> Vec<Vec<u8>> {
    // A whole upload as a scripted iperf3 server answers it: a step byte n takes
    // n % 17 bytes of input when n % 5 is 2..4 (52: one byte, 67: sixteen, 2: two), and
    // n % 5 == 0 reports this end's senders done.
    let json = br#"{"streams":[]}"#;
    let mut results = (json.len() as u32).to_be_bytes().to_vec();
    results.extend_from_slice(json);
    let mut script = vec![0u8, 52, 9, 52, 10, 52, 1, 52, 2, 0, 52, 13, 67];
    script.extend_from_slice(&results[..16]);
    script.push(2);
    script.extend_from_slice(&results[16..]);
    script.extend_from_slice(&[52, 14]);
    vec![script]
}

/// The `netio_server` body's seed: a TCP connection as the stock client drives it.
fn netio_server_seeds() -> Vec<Vec<u8>> {
    // A TCP connection as the stock client drives it, with 16-byte blocks: a step byte
    // n takes n % 23 bytes when n % 5 is 2..4 (8: eight, 39: sixteen), 0 ends sending.
    let ctl = |cmd: u32, data: u32| {
        let mut v = cmd.to_be_bytes().to_vec();
        v.extend(data.to_be_bytes());
        v
    };
    let mut script = vec![0u8, 8];
    script.extend(ctl(1, 16));
    for first in [0u8, 0, 1] {
        script.push(39);
        script.push(first);
        script.extend([0x5a; 15]);
    }
    script.push(8);
    script.extend(ctl(2, 16));
    script.extend([0, 8]);
    script.extend(ctl(0, 0));
    vec![script]
}

/// The `nc_test` body's seeds: each test kind as the stock master asks for it, and the other records.
fn nc_test_seeds() -> Vec<Vec<u8>> {
    // Each test kind as the stock master asks for it (4 buffers of 100 bytes), then
    // the slave's buffers in 7-byte chunks as the body cuts them, and the other records.
    use netchar_wire::nc_test::{data_buffer, Kind, Reply, Request, Results};
    let mut out: Vec<Vec<u8>> = [Kind::UdpEcho, Kind::UdpSend, Kind::UdpRecv, Kind::TcpEcho, Kind::TcpRecv]
        .iter()
        .map(|&k| {
            let mut v = Request::new(k, 3, 4, 100).encode().to_vec();
            (0..4).for_each(|i| v.extend(data_buffer(i, 100)));
            v
        })
        .collect();
    out.extend([
        Request::new(Kind::SetLoad, 4, 50, 0).encode().to_vec(),
        Reply::ack(3).encode().to_vec(),
        Results { seq: 3, nsent: 4, nrecvd: 4 }.encode().to_vec(),
    ]);
    out
}

/// The `iperf2` body's seeds: client headers of each layout and server reports.
fn iperf2_seeds() -> Vec<Vec<u8>> {
    use netchar_wire::iperf2::{Amount, ClientHeader, Layout, ServerReport};
    let mut report = ServerReport { bytes: 131_800, datagrams: 659, lost: 3, ..ServerReport::default() };
    let mut out = vec![
        ClientHeader::new(Amount::Bytes(1_000_000), 0, 5001).encode(Layout::V21),
        ClientHeader::new(Amount::Seconds(10.0), 0, 5001).encode(Layout::V22),
        ClientHeader::udp_settings(Layout::V21, Amount::Seconds(1.0), 1470, 1 << 20, 5001),
        report.reply(Layout::V21, &[]),
    ];
    report.out_of_order = 1;
    out.push(report.reply(Layout::V205, &[0xFF; 12]));
    out
}

/// iperf2's decoders (netchar_wire::iperf2): a decoded client header takes no more than it was
/// given nor more than iperf2's 256-byte cap, and re-decodes the same from its own bytes; a
/// parsed server report re-encodes to a report that parses the same; the UDP format never calls
/// a negative sequence number data, and re-emits data it classified.
pub fn iperf2(data: &[u8]) {
    use netchar_wire::iperf2::{ClientHeader, Layout, ServerReport, UdpFormat, UdpHeader, MAX_HEADER_LEN};
    if let Ok(Some((h, len))) = ClientHeader::decode(data) {
        assert!(len <= data.len() && len <= MAX_HEADER_LEN, "a header took {len} of {} bytes", data.len());
        assert_eq!(ClientHeader::decode(&data[..len]).ok().flatten(), Some((h, len)), "a header needs bytes after it");
    }
    if let Some((r, layout)) = ServerReport::parse_reply(data) {
        let again = r.reply(layout, data);
        let (back, l2) = ServerReport::parse_reply(&again).expect("a re-encoded report parses");
        assert_eq!(l2, layout);
        assert_eq!(
            (back.bytes, back.datagrams & 0xFFFF_FFFF, back.lost & 0xFFFF_FFFF),
            (r.bytes, r.datagrams & 0xFFFF_FFFF, r.lost & 0xFFFF_FFFF)
        );
    }
    for layout in [Layout::V205, Layout::V21] {
        let f = UdpFormat::new(layout, 1_000_000_000, Vec::new());
        let h = UdpHeader::parse(data, layout);
        match f.classify(data) {
            Received::Data { sequence, sent_ns, .. } => {
                let h = h.expect("data has a header");
                assert!(h.seq > 0 || (layout == Layout::V205 && h.seq == 0), "seq {} called data", h.seq);
                let mut b = vec![0u8; layout.datagram_header_len()];
                f.emit(&mut b, 1, sequence, sent_ns);
                assert_eq!(UdpHeader::parse(&b, layout).map(|x| x.seq), Some(h.seq), "data re-emits to another number");
            }
            Received::Control => assert!(h.is_some_and(|h| h.seq <= 0), "a positive number called control"),
            Received::Foreign => assert!(h.is_none(), "a whole header called foreign"),
        }
    }
}

/// eCos nc_test (`netchar_wire::nc_test`): every record decodes from any bytes without a
/// panic and a decoded record re-encodes to the bytes it came from; the slave's request
/// handling answers the request's own seq and starts only tests inside its limits; the rest of
/// the input then drives that test's loop, and a master's loop, as a peer would (any buffer,
/// a timeout, a short read), and both loops end within a bounded number of steps.
pub fn nc_test(data: &[u8]) {
    use netchar_wire::nc_test::*;
    use std::time::{Duration, Instant};
    if let Ok(r) = Request::decode(data) {
        assert_eq!(&r.encode()[..], &data[..REQUEST_LEN], "a request re-encodes to other bytes");
    }
    match Reply::decode(data) {
        Ok(r) => assert_eq!(&r.encode()[..], &data[..REPLY_LEN], "a reply re-encodes to other bytes"),
        Err(NcError::Lp64) => assert_eq!(data.len(), REPLY_LEN_LP64),
        Err(_) => assert!(data.len() < REPLY_LEN),
    }
    if let Ok(h) = DataHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..DATA_HEADER_LEN], "a data header re-encodes to other bytes");
    }
    if let Ok(r) = Results::decode(data) {
        assert_eq!(&r.encode()[..], &data[..RESULTS_LEN], "a results record re-encodes to other bytes");
    }

    // Small limits keep one input's loops short; the checks are the same at any size.
    let slave = Slave { max_nbufs: 64, max_udp_send_bytes: 64 * 1024, ..Slave::default() };
    let Some(decision) = slave.handle(data) else {
        assert!(data.len() < REQUEST_LEN, "a whole request went unanswered");
        return;
    };
    let req = Request::decode(data).expect("the slave answered a request");
    assert_eq!(decision.reply.seq, req.seq, "the reply answers another seq");
    let rest = &data[REQUEST_LEN.min(data.len())..];
    if let SlaveAction::Test(t) = decision.action {
        assert!(decision.reply.is_ack());
        assert!(t.nbufs <= slave.max_nbufs && t.buflen <= MAX_BUFLEN, "a test beyond the limits started");
        let mut test = SlaveTest::new(t).expect("an ACKed test runs");
        let mut chunks = rest.chunks(7);
        let mut steps = 0u64;
        loop {
            steps += 1;
            assert!(steps <= 4 * u64::from(t.nbufs) + 64, "the slave's loop does not end");
            match test.next_step() {
                Step::Done => break,
                Step::Recv { len, .. } => {
                    assert_eq!(len, t.buflen as usize + DATA_HEADER_LEN);
                    let chunk = chunks.next();
                    // A chunk starting with an odd byte stands for a timeout.
                    test.received(chunk.filter(|c| c.first().is_some_and(|b| b % 2 == 0)));
                }
                Step::Send(b) => {
                    assert!(b.len() <= t.buflen as usize + DATA_HEADER_LEN || b.len() == RESULTS_LEN);
                    if chunks.next().is_some_and(|c| c.len() < 3) {
                        test.send_failed();
                    }
                }
                Step::Pause(_) | Step::Print(_) => {}
            }
        }
        let r = test.results();
        assert_eq!(r.seq, t.seq);
        assert!(r.nsent <= t.nbufs && r.nrecvd <= t.nbufs, "{r:?} of {} buffers", t.nbufs);
    }

    // A master's loop of the request's kind, fed the rest as the slave's buffers.
    let Some(kind) = req.kind().filter(|k| k.is_test()) else { return };
    let (nbufs, buflen) = (req.nbufs % 64, req.buflen % 2048);
    let pause = Pause { ticks: req.timeout % 3, threshold: req.slave_port % 5 };
    let mut master = MasterTest::new(kind, req.seq, nbufs, buflen, pause);
    let mut now = Instant::now();
    let mut chunks = rest.chunks(11);
    let mut steps = 0u64;
    loop {
        steps += 1;
        assert!(steps <= 8 * u64::from(nbufs) + 64, "the master's loop does not end");
        now += Duration::from_millis(1);
        match master.next_step(now) {
            Step::Done => break,
            Step::Recv { .. } => {
                let chunk = chunks.next();
                master.received(chunk.filter(|c| c.first().is_some_and(|b| b % 2 == 0)), now);
            }
            Step::Send(_) | Step::Pause(_) | Step::Print(_) => {}
        }
    }
    let _ = master.report().bytes();
}
