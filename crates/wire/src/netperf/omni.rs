//! The OMNI test's three layouts (nettest_bsd.h `omni_request_struct`, `omni_response_struct`,
//! `omni_results_struct`), typed, and what they mean for the six tests netchar speaks.
//!
//! Word numbers below are indices into the test-specific data. Only the first words of each
//! layout are converted to network order (38 of the request, 18 of the response, 27 of the
//! results); the character fields after them go as they are, at the byte offsets given.
//! Encoding and decoding are total: any 656-byte message decodes to some value of each layout,
//! and a decoded value encodes back to the same words.

use super::{Family, Message, TestEnd, TestKind};

/// `flags` bits (nettest_bsd.h `OMNI_*`).
pub mod flag {
    /// TCP_NODELAY on the server's data socket (`-D`).
    pub const NO_DELAY: u32 = 0x1;
    /// The server sends with sendfile.
    pub const USE_SENDFILE: u32 = 0x2;
    /// A connection per transaction (TCP_CRR, TCP_CC).
    pub const CONNECT_TEST: u32 = 0x4;
    /// Measure the server's CPU (`-C`); in the response: it is measured.
    pub const MEASURE_CPU: u32 = 0x8;
    /// UDP checksums off.
    pub const CHECKSUM_OFF: u32 = 0x10;
    /// Routing allowed (no SO_DONTROUTE): netperf sets it except for UDP_STREAM. netserver
    /// also reads this bit as "report the congestion control" (netperf's OMNI_WANT_REM_CONG
    /// has the same value), so TCP tests get the algorithm's name in their results.
    pub const ROUTING_ALLOWED: u32 = 0x20;
    /// TCP Fast Open.
    pub const FASTOPEN: u32 = 0x800;
    /// UDP: the server connects its socket to netperf's.
    pub const USE_CONNECTED: u32 = 0x4000;
    /// SO_KEEPALIVE on the data socket.
    pub const WANT_KEEPALIVE: u32 = 0x8000_0000;
}

/// `direction` bits, seen from the end that receives the request: netserver transmits, or
/// receives, or both (request/response).
pub mod direction {
    /// The server sends.
    pub const XMIT: u32 = 0x2;
    /// The server receives.
    pub const RECV: u32 = 0x4;
}

/// `socket_type`: netperf's own numbers (NST_*).
pub mod socket_type {
    /// SOCK_STREAM.
    pub const STREAM: u32 = 1;
    /// SOCK_DGRAM.
    pub const DGRAM: u32 = 2;
}

/// IPPROTO_TCP.
pub const PROTO_TCP: u32 = 6;
/// IPPROTO_UDP.
pub const PROTO_UDP: u32 = 17;

/// Words of the request netperf converts (`OMNI_REQUEST_CONV_CUTOFF`).
pub const REQUEST_CONVERTED: usize = 38;
/// Words of the response netserver converts (`OMNI_RESPONSE_CONV_CUTOFF`).
pub const RESPONSE_CONVERTED: usize = 18;
/// Words of the results netserver converts (`OMNI_RESULTS_CONV_CUTOFF`).
pub const RESULTS_CONVERTED: usize = 27;

/// Request word numbers (and the byte offsets of its character fields).
pub(crate) mod req {
    pub(crate) const SEND_BUF_SIZE: usize = 0;
    pub(crate) const SEND_SIZE: usize = 1;
    pub(crate) const SEND_ALIGNMENT: usize = 2;
    pub(crate) const SEND_OFFSET: usize = 3;
    pub(crate) const SEND_WIDTH: usize = 4;
    pub(crate) const REQUEST_SIZE: usize = 5;
    pub(crate) const RECV_BUF_SIZE: usize = 6;
    pub(crate) const RECEIVE_SIZE: usize = 7;
    pub(crate) const RECV_ALIGNMENT: usize = 8;
    pub(crate) const RECV_OFFSET: usize = 9;
    pub(crate) const RECV_WIDTH: usize = 10;
    pub(crate) const RESPONSE_SIZE: usize = 11;
    pub(crate) const FLAGS: usize = 12;
    pub(crate) const CPU_RATE: usize = 13;
    pub(crate) const TEST_LENGTH: usize = 14;
    pub(crate) const SO_RCVAVOID: usize = 15;
    pub(crate) const SO_SNDAVOID: usize = 16;
    pub(crate) const SEND_DIRTY_COUNT: usize = 17;
    pub(crate) const RECV_DIRTY_COUNT: usize = 18;
    pub(crate) const RECV_CLEAN_COUNT: usize = 19;
    pub(crate) const DATA_PORT: usize = 20;
    pub(crate) const IPFAMILY: usize = 21;
    pub(crate) const SOCKET_TYPE: usize = 22;
    pub(crate) const PROTOCOL: usize = 23;
    pub(crate) const DIRECTION: usize = 24;
    pub(crate) const NETPERF_PORT: usize = 25;
    pub(crate) const INTERVAL_BURST: usize = 26;
    pub(crate) const INTERVAL_USECS: usize = 27;
    pub(crate) const NETPERF_IP: usize = 28;
    pub(crate) const NETSERVER_IP: usize = 32;
    pub(crate) const SOCKET_PRIO: usize = 36;
    pub(crate) const SOCKET_TOS: usize = 37;
    /// Byte offset of `cong_control[16]`.
    pub(crate) const CONG_CONTROL_AT: usize = 152;
    /// Byte offset of `fill_file[32]`.
    pub(crate) const FILL_FILE_AT: usize = 168;
}

/// Response word numbers (and the byte offsets of its character fields).
pub(crate) mod rsp {
    pub(crate) const RECV_BUF_SIZE: usize = 0;
    pub(crate) const RECEIVE_SIZE: usize = 1;
    pub(crate) const RECV_WIDTH: usize = 2;
    pub(crate) const SEND_BUF_SIZE: usize = 3;
    pub(crate) const SEND_SIZE: usize = 4;
    pub(crate) const SEND_WIDTH: usize = 5;
    pub(crate) const FLAGS: usize = 6;
    pub(crate) const CPU_RATE: usize = 7;
    pub(crate) const TEST_LENGTH: usize = 8;
    pub(crate) const SO_RCVAVOID: usize = 9;
    pub(crate) const SO_SNDAVOID: usize = 10;
    pub(crate) const DATA_PORT: usize = 11;
    pub(crate) const INTERVAL_BURST: usize = 12;
    pub(crate) const INTERVAL_USECS: usize = 13;
    pub(crate) const CPU_FREQUENCY: usize = 14;
    pub(crate) const SECURITY_INFO: usize = 15;
    pub(crate) const SOCKET_PRIO: usize = 16;
    pub(crate) const SOCKET_TOS: usize = 17;
    /// Byte offset of `system_model[33]`.
    pub(crate) const SYSTEM_MODEL_AT: usize = 72;
    /// Byte offset of `cpu_model[80]`.
    pub(crate) const CPU_MODEL_AT: usize = 105;
    /// Byte offset of `security_string[16]`.
    pub(crate) const SECURITY_STRING_AT: usize = 185;
}

/// Results word numbers (and the byte offsets of its character fields).
pub(crate) mod res {
    pub(crate) const BYTES_RECEIVED_HI: usize = 0;
    pub(crate) const BYTES_RECEIVED_LO: usize = 1;
    pub(crate) const RECV_CALLS: usize = 2;
    pub(crate) const RECV_BUF_SIZE: usize = 3;
    pub(crate) const BYTES_SENT_HI: usize = 4;
    pub(crate) const BYTES_SENT_LO: usize = 5;
    pub(crate) const SEND_CALLS: usize = 6;
    pub(crate) const SEND_BUF_SIZE: usize = 7;
    pub(crate) const FAILED_SENDS: usize = 8;
    pub(crate) const TRANS_RECEIVED: usize = 9;
    pub(crate) const ELAPSED_TIME: usize = 10;
    pub(crate) const CPU_UTIL: usize = 11;
    pub(crate) const CPU_PERCENT_USER: usize = 12;
    pub(crate) const CPU_PERCENT_SYSTEM: usize = 13;
    pub(crate) const CPU_PERCENT_IOWAIT: usize = 14;
    pub(crate) const CPU_PERCENT_IRQ: usize = 15;
    pub(crate) const CPU_PERCENT_SWINTR: usize = 16;
    pub(crate) const SERV_DEM: usize = 17;
    pub(crate) const CPU_METHOD: usize = 18;
    pub(crate) const NUM_CPUS: usize = 19;
    pub(crate) const PEAK_CPU_ID: usize = 20;
    pub(crate) const PEAK_CPU_UTIL: usize = 21;
    pub(crate) const VENDOR: usize = 22;
    pub(crate) const DEVICE: usize = 23;
    pub(crate) const SUBVENDOR: usize = 24;
    pub(crate) const SUBDEVICE: usize = 25;
    pub(crate) const TRANSPORT_RETRANS: usize = 26;
    /// Byte offsets of the character fields, each with its length.
    pub(crate) const IFNAME_AT: usize = 108;
    pub(crate) const DRIVER_AT: usize = 124;
    pub(crate) const VERSION_AT: usize = 156;
    pub(crate) const FIRMWARE_AT: usize = 188;
    pub(crate) const BUS_AT: usize = 220;
    pub(crate) const IFSLOT_AT: usize = 252;
    pub(crate) const CONG_CONTROL_AT: usize = 268;
}

/// A NUL-padded character field as text (up to its first NUL; invalid UTF-8 replaced).
pub fn field_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A character field of `N` bytes from text: truncated to leave a NUL, as netperf's
/// `strncpy` and terminator do.
pub fn text_field<const N: usize>(text: &str) -> [u8; N] {
    let mut f = [0u8; N];
    let n = text.len().min(N.saturating_sub(1));
    f[..n].copy_from_slice(&text.as_bytes()[..n]);
    f
}

fn array<const N: usize>(m: &Message, at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    let b = m.bytes(at, N);
    a[..b.len()].copy_from_slice(b);
    a
}

/// What netperf asks netserver for (`omni_request_struct`). Sizes of −1 ask for the system's
/// default (or, for the message sizes, netserver's choice).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OmniRequest {
    /// Header word: the CPU netserver should bind to (`-T ,N`), −1 for none.
    pub affinity: i32,
    /// SO_SNDBUF for the server's socket (`-S N,`).
    pub send_buf_size: i32,
    /// Bytes per send() on the server (`-m ,N`).
    pub send_size: i32,
    /// Alignment of the server's send buffers (netperf's default 8).
    pub send_alignment: i32,
    /// Offset from that alignment.
    pub send_offset: i32,
    /// Send buffers in the server's ring; netperf sends its own ring's width.
    pub send_width: i32,
    /// Request size of a request/response test (`-r N,`), −1 for streams.
    pub request_size: i32,
    /// SO_RCVBUF for the server's socket (`-S ,N`).
    pub recv_buf_size: i32,
    /// Bytes per recv() on the server (`-M N,`).
    pub receive_size: i32,
    /// Alignment of the server's receive buffers.
    pub recv_alignment: i32,
    /// Offset from that alignment.
    pub recv_offset: i32,
    /// Receive buffers in the server's ring.
    pub recv_width: i32,
    /// Response size (`-r ,N`), −1 for streams.
    pub response_size: i32,
    /// [`flag`] bits.
    pub flags: u32,
    /// The server's CPU rate if netperf knows it already (0.0: calibrate).
    pub cpu_rate: f32,
    /// Seconds, or −units ([`TestEnd`]).
    pub test_length: i32,
    /// HP-UX copy avoidance on receive.
    pub so_rcvavoid: u32,
    /// HP-UX copy avoidance on send.
    pub so_sndavoid: u32,
    /// Bytes to dirty before each send (−1: none).
    pub send_dirty_count: i32,
    /// Bytes to dirty before each recv.
    pub recv_dirty_count: i32,
    /// Bytes to read before each recv.
    pub recv_clean_count: i32,
    /// The port the server should bind (`-P ,N`), 0 for any.
    pub data_port: u32,
    /// [`Family`] code.
    pub ipfamily: u32,
    /// [`socket_type`].
    pub socket_type: u32,
    /// IPPROTO number.
    pub protocol: u32,
    /// [`direction`] bits.
    pub direction: u32,
    /// netperf's own data port, when the server must send to it (UDP from the server).
    pub netperf_port: u32,
    /// Paced sends per interval (netserver builds without WANT_INTERVALS ignore it).
    pub interval_burst: u32,
    /// The interval, microseconds.
    pub interval_usecs: u32,
    /// netperf's data address: IPv4 as one host-order word; IPv6 as four words of the address
    /// as netperf's host held it.
    pub netperf_ip: [u32; 4],
    /// The address the server should bind (`-H name` of the test options), zero for any.
    pub netserver_ip: [u32; 4],
    /// SO_PRIORITY for the server (−1: leave).
    pub socket_prio: i32,
    /// IP_TOS for the server (−1: leave).
    pub socket_tos: i32,
    /// TCP_CONGESTION for the server (`-K ,name`), NUL-padded.
    pub cong_control: [u8; 16],
    /// A file the server fills its send buffers from, NUL-padded.
    pub fill_file: [u8; 32],
}

impl OmniRequest {
    /// The request message (type DO_OMNI).
    pub fn encode(&self) -> Message {
        let mut m = Message::new(super::code::DO_OMNI, self.affinity);
        let ints = [
            (req::SEND_BUF_SIZE, self.send_buf_size as u32),
            (req::SEND_SIZE, self.send_size as u32),
            (req::SEND_ALIGNMENT, self.send_alignment as u32),
            (req::SEND_OFFSET, self.send_offset as u32),
            (req::SEND_WIDTH, self.send_width as u32),
            (req::REQUEST_SIZE, self.request_size as u32),
            (req::RECV_BUF_SIZE, self.recv_buf_size as u32),
            (req::RECEIVE_SIZE, self.receive_size as u32),
            (req::RECV_ALIGNMENT, self.recv_alignment as u32),
            (req::RECV_OFFSET, self.recv_offset as u32),
            (req::RECV_WIDTH, self.recv_width as u32),
            (req::RESPONSE_SIZE, self.response_size as u32),
            (req::FLAGS, self.flags),
            (req::CPU_RATE, self.cpu_rate.to_bits()),
            (req::TEST_LENGTH, self.test_length as u32),
            (req::SO_RCVAVOID, self.so_rcvavoid),
            (req::SO_SNDAVOID, self.so_sndavoid),
            (req::SEND_DIRTY_COUNT, self.send_dirty_count as u32),
            (req::RECV_DIRTY_COUNT, self.recv_dirty_count as u32),
            (req::RECV_CLEAN_COUNT, self.recv_clean_count as u32),
            (req::DATA_PORT, self.data_port),
            (req::IPFAMILY, self.ipfamily),
            (req::SOCKET_TYPE, self.socket_type),
            (req::PROTOCOL, self.protocol),
            (req::DIRECTION, self.direction),
            (req::NETPERF_PORT, self.netperf_port),
            (req::INTERVAL_BURST, self.interval_burst),
            (req::INTERVAL_USECS, self.interval_usecs),
            (req::SOCKET_PRIO, self.socket_prio as u32),
            (req::SOCKET_TOS, self.socket_tos as u32),
        ];
        for (i, v) in ints {
            m.set_word(i, v);
        }
        for k in 0..4 {
            m.set_word(req::NETPERF_IP + k, self.netperf_ip[k]);
            m.set_word(req::NETSERVER_IP + k, self.netserver_ip[k]);
        }
        m.set_bytes(req::CONG_CONTROL_AT, &self.cong_control);
        m.set_bytes(req::FILL_FILE_AT, &self.fill_file);
        m
    }

    /// Reads the layout from any message (its type is the caller's to check).
    pub fn decode(m: &Message) -> Self {
        let i = |w: usize| m.word(w) as i32;
        let u = |w: usize| m.word(w);
        let four = |w: usize| [u(w), u(w + 1), u(w + 2), u(w + 3)];
        Self {
            affinity: m.status,
            send_buf_size: i(req::SEND_BUF_SIZE),
            send_size: i(req::SEND_SIZE),
            send_alignment: i(req::SEND_ALIGNMENT),
            send_offset: i(req::SEND_OFFSET),
            send_width: i(req::SEND_WIDTH),
            request_size: i(req::REQUEST_SIZE),
            recv_buf_size: i(req::RECV_BUF_SIZE),
            receive_size: i(req::RECEIVE_SIZE),
            recv_alignment: i(req::RECV_ALIGNMENT),
            recv_offset: i(req::RECV_OFFSET),
            recv_width: i(req::RECV_WIDTH),
            response_size: i(req::RESPONSE_SIZE),
            flags: u(req::FLAGS),
            cpu_rate: f32::from_bits(u(req::CPU_RATE)),
            test_length: i(req::TEST_LENGTH),
            so_rcvavoid: u(req::SO_RCVAVOID),
            so_sndavoid: u(req::SO_SNDAVOID),
            send_dirty_count: i(req::SEND_DIRTY_COUNT),
            recv_dirty_count: i(req::RECV_DIRTY_COUNT),
            recv_clean_count: i(req::RECV_CLEAN_COUNT),
            data_port: u(req::DATA_PORT),
            ipfamily: u(req::IPFAMILY),
            socket_type: u(req::SOCKET_TYPE),
            protocol: u(req::PROTOCOL),
            direction: u(req::DIRECTION),
            netperf_port: u(req::NETPERF_PORT),
            interval_burst: u(req::INTERVAL_BURST),
            interval_usecs: u(req::INTERVAL_USECS),
            netperf_ip: four(req::NETPERF_IP),
            netserver_ip: four(req::NETSERVER_IP),
            socket_prio: i(req::SOCKET_PRIO),
            socket_tos: i(req::SOCKET_TOS),
            cong_control: array(m, req::CONG_CONTROL_AT),
            fill_file: array(m, req::FILL_FILE_AT),
        }
    }

    /// Which of the six tests this is, or what it asks for that netchar does not run.
    pub fn kind(&self) -> Result<TestKind, String> {
        let xmit = self.direction & direction::XMIT != 0;
        let recv = self.direction & direction::RECV != 0;
        let connect = self.flags & flag::CONNECT_TEST != 0;
        // Both ways with a request or response size is request/response (sizes that netserver
        // could not use are the caller's to refuse); both ways without is a bidirectional
        // stream, which netchar does not run.
        let rr = self.request_size > 0 || self.response_size > 0;
        let kind = match (self.protocol, self.socket_type) {
            (PROTO_TCP, socket_type::STREAM) => match (xmit, recv, connect) {
                (false, true, false) => Some(TestKind::TcpStream),
                (true, false, false) => Some(TestKind::TcpMaerts),
                (true, true, false) if rr => Some(TestKind::TcpRr),
                (true, true, true) if rr => Some(TestKind::TcpCrr),
                _ => None,
            },
            (PROTO_UDP, socket_type::DGRAM) => match (xmit, recv, connect) {
                (false, true, false) => Some(TestKind::UdpStream),
                (true, true, false) if rr => Some(TestKind::UdpRr),
                _ => None,
            },
            _ => None,
        };
        kind.ok_or_else(|| {
            format!(
                "an OMNI test netchar does not run (protocol {}, socket type {}, direction {:#x}{}{}): \
                 it runs TCP_STREAM, TCP_MAERTS, UDP_STREAM, TCP_RR, UDP_RR and TCP_CRR",
                self.protocol,
                self.socket_type,
                self.direction,
                if connect { ", a connection per transaction" } else { "" },
                if rr {
                    format!(", request {} response {}", self.request_size, self.response_size)
                } else {
                    String::new()
                },
            )
        })
    }

    /// How the test ends.
    pub fn end(&self) -> TestEnd {
        TestEnd::from_word(self.test_length)
    }

    /// The data connection's family, if it is one netchar knows.
    pub fn family(&self) -> Option<Family> {
        Family::from_code(self.ipfamily)
    }

    /// The requested congestion control, if any.
    pub fn congestion_control(&self) -> Option<String> {
        Some(field_text(&self.cong_control)).filter(|s| !s.is_empty())
    }

    /// The IPv4 address netperf asks the server to bind (`-H` of the test options), if any.
    pub fn bind_ipv4(&self) -> Option<std::net::Ipv4Addr> {
        (self.family() == Some(Family::V4) && self.netserver_ip[0] != 0)
            .then(|| std::net::Ipv4Addr::from(self.netserver_ip[0]))
    }
}

/// netserver's answer to an OMNI request (`omni_response_struct`): what it set up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OmniResponse {
    /// Header word: 0, or the errno of a refusal.
    pub errno: i32,
    /// SO_RCVBUF of the server's socket, as getsockopt reported it (netperf's RSR_SIZE).
    pub recv_buf_size: i32,
    /// Bytes per recv() on the server.
    pub receive_size: i32,
    /// Receive buffers in its ring.
    pub recv_width: i32,
    /// SO_SNDBUF (netperf's RSS_SIZE).
    pub send_buf_size: i32,
    /// Bytes per send() on the server.
    pub send_size: i32,
    /// Send buffers in its ring.
    pub send_width: i32,
    /// [`flag`] bits: NO_DELAY and MEASURE_CPU as the server set them.
    pub flags: u32,
    /// The server's CPU rate (netserver with /proc/stat: its tick rate, 100).
    pub cpu_rate: f32,
    /// Not set by netserver (left from its previous message).
    pub test_length: i32,
    /// Copy avoidance on receive, as set.
    pub so_rcvavoid: u32,
    /// Copy avoidance on send, as set.
    pub so_sndavoid: u32,
    /// The port netperf must connect (or send) to.
    pub data_port: u32,
    /// Pacing burst as the server runs it.
    pub interval_burst: u32,
    /// Pacing interval.
    pub interval_usecs: u32,
    /// MHz, when reported.
    pub cpu_frequency: u32,
    /// SELinux and the like, when reported.
    pub security_info: u32,
    /// SO_PRIORITY as set.
    pub socket_prio: i32,
    /// IP_TOS as set.
    pub socket_tos: i32,
    /// NUL-padded.
    pub system_model: [u8; 33],
    /// NUL-padded.
    pub cpu_model: [u8; 80],
    /// NUL-padded.
    pub security_string: [u8; 16],
}

impl OmniResponse {
    /// The response message (type OMNI_RESPONSE), every number in network order.
    pub fn encode(&self) -> Message {
        let mut m = Message::new(super::code::OMNI_RESPONSE, self.errno);
        let ints = [
            (rsp::RECV_BUF_SIZE, self.recv_buf_size as u32),
            (rsp::RECEIVE_SIZE, self.receive_size as u32),
            (rsp::RECV_WIDTH, self.recv_width as u32),
            (rsp::SEND_BUF_SIZE, self.send_buf_size as u32),
            (rsp::SEND_SIZE, self.send_size as u32),
            (rsp::SEND_WIDTH, self.send_width as u32),
            (rsp::FLAGS, self.flags),
            (rsp::CPU_RATE, self.cpu_rate.to_bits()),
            (rsp::TEST_LENGTH, self.test_length as u32),
            (rsp::SO_RCVAVOID, self.so_rcvavoid),
            (rsp::SO_SNDAVOID, self.so_sndavoid),
            (rsp::DATA_PORT, self.data_port),
            (rsp::INTERVAL_BURST, self.interval_burst),
            (rsp::INTERVAL_USECS, self.interval_usecs),
            (rsp::CPU_FREQUENCY, self.cpu_frequency),
            (rsp::SECURITY_INFO, self.security_info),
            (rsp::SOCKET_PRIO, self.socket_prio as u32),
            (rsp::SOCKET_TOS, self.socket_tos as u32),
        ];
        for (i, v) in ints {
            m.set_word(i, v);
        }
        m.set_bytes(rsp::SYSTEM_MODEL_AT, &self.system_model);
        m.set_bytes(rsp::CPU_MODEL_AT, &self.cpu_model);
        m.set_bytes(rsp::SECURITY_STRING_AT, &self.security_string);
        m
    }

    /// Reads the layout from any message.
    pub fn decode(m: &Message) -> Self {
        let i = |w: usize| m.word(w) as i32;
        let u = |w: usize| m.word(w);
        Self {
            errno: m.status,
            recv_buf_size: i(rsp::RECV_BUF_SIZE),
            receive_size: i(rsp::RECEIVE_SIZE),
            recv_width: i(rsp::RECV_WIDTH),
            send_buf_size: i(rsp::SEND_BUF_SIZE),
            send_size: i(rsp::SEND_SIZE),
            send_width: i(rsp::SEND_WIDTH),
            flags: u(rsp::FLAGS),
            cpu_rate: f32::from_bits(u(rsp::CPU_RATE)),
            test_length: i(rsp::TEST_LENGTH),
            so_rcvavoid: u(rsp::SO_RCVAVOID),
            so_sndavoid: u(rsp::SO_SNDAVOID),
            data_port: u(rsp::DATA_PORT),
            interval_burst: u(rsp::INTERVAL_BURST),
            interval_usecs: u(rsp::INTERVAL_USECS),
            cpu_frequency: u(rsp::CPU_FREQUENCY),
            security_info: u(rsp::SECURITY_INFO),
            socket_prio: i(rsp::SOCKET_PRIO),
            socket_tos: i(rsp::SOCKET_TOS),
            system_model: array(m, rsp::SYSTEM_MODEL_AT),
            cpu_model: array(m, rsp::CPU_MODEL_AT),
            security_string: array(m, rsp::SECURITY_STRING_AT),
        }
    }

    /// TCP_NODELAY is on at the server.
    pub fn nodelay(&self) -> bool {
        self.flags & flag::NO_DELAY != 0
    }

    /// The server measures its CPU: the results' CPU fields are real.
    pub fn cpu_measured(&self) -> bool {
        self.flags & flag::MEASURE_CPU != 0
    }
}

/// netserver's figures at the end of a test (`omni_results_struct`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OmniResults {
    /// Header word: 0, or the errno of a failure during the test.
    pub errno: i32,
    /// Bytes the server received (two words: high, low).
    pub bytes_received: u64,
    /// Its recv() calls that returned data.
    pub recv_calls: u32,
    /// SO_RCVBUF at the end (autotuning may have grown it).
    pub recv_buf_size: i32,
    /// Bytes the server sent.
    pub bytes_sent: u64,
    /// Its send() calls.
    pub send_calls: u32,
    /// SO_SNDBUF at the end.
    pub send_buf_size: i32,
    /// Not set by netserver (left from its previous message).
    pub failed_sends: u32,
    /// Transactions (request/response tests).
    pub trans_received: u32,
    /// Seconds from the response to the end, less [`super::PAD_TIME`] when its timer ended
    /// the test.
    pub elapsed_time: f32,
    /// CPU utilisation, percent of all CPUs (only when measured).
    pub cpu_util: f32,
    /// User share.
    pub cpu_percent_user: f32,
    /// System share.
    pub cpu_percent_system: f32,
    /// I/O wait share.
    pub cpu_percent_iowait: f32,
    /// Interrupt share.
    pub cpu_percent_irq: f32,
    /// Soft-interrupt share.
    pub cpu_percent_swintr: f32,
    /// Not set by netserver.
    pub serv_dem: f32,
    /// How the CPU was measured (netlib.h: 0 unknown, 8 /proc/stat, ...).
    pub cpu_method: u32,
    /// CPUs counted (0 when not measured).
    pub num_cpus: u32,
    /// The busiest CPU.
    pub peak_cpu_id: i32,
    /// Its utilisation.
    pub peak_cpu_util: f32,
    /// PCI ids of the egress interface, when asked.
    pub vendor: i32,
    /// PCI device.
    pub device: i32,
    /// PCI subvendor.
    pub subvendor: i32,
    /// PCI subdevice.
    pub subdevice: i32,
    /// TCP retransmissions of the data connection, −1 unknown (UDP).
    pub transport_retrans: i32,
    /// Egress interface name.
    pub ifname: [u8; 16],
    /// Its driver.
    pub driver: [u8; 32],
    /// Driver version.
    pub version: [u8; 32],
    /// Firmware.
    pub firmware: [u8; 32],
    /// Bus.
    pub bus: [u8; 32],
    /// Slot.
    pub ifslot: [u8; 16],
    /// TCP congestion control of the data connection.
    pub cong_control: [u8; 16],
}

impl OmniResults {
    /// The results message, every number in network order and the type big-endian (netserver
    /// itself sends its type little-endian; netperf does not read it).
    pub fn encode(&self) -> Message {
        let mut m = Message::new(super::code::OMNI_RESPONSE, self.errno);
        let ints = [
            (res::BYTES_RECEIVED_HI, (self.bytes_received >> 32) as u32),
            (res::BYTES_RECEIVED_LO, self.bytes_received as u32),
            (res::RECV_CALLS, self.recv_calls),
            (res::RECV_BUF_SIZE, self.recv_buf_size as u32),
            (res::BYTES_SENT_HI, (self.bytes_sent >> 32) as u32),
            (res::BYTES_SENT_LO, self.bytes_sent as u32),
            (res::SEND_CALLS, self.send_calls),
            (res::SEND_BUF_SIZE, self.send_buf_size as u32),
            (res::FAILED_SENDS, self.failed_sends),
            (res::TRANS_RECEIVED, self.trans_received),
            (res::ELAPSED_TIME, self.elapsed_time.to_bits()),
            (res::CPU_UTIL, self.cpu_util.to_bits()),
            (res::CPU_PERCENT_USER, self.cpu_percent_user.to_bits()),
            (res::CPU_PERCENT_SYSTEM, self.cpu_percent_system.to_bits()),
            (res::CPU_PERCENT_IOWAIT, self.cpu_percent_iowait.to_bits()),
            (res::CPU_PERCENT_IRQ, self.cpu_percent_irq.to_bits()),
            (res::CPU_PERCENT_SWINTR, self.cpu_percent_swintr.to_bits()),
            (res::SERV_DEM, self.serv_dem.to_bits()),
            (res::CPU_METHOD, self.cpu_method),
            (res::NUM_CPUS, self.num_cpus),
            (res::PEAK_CPU_ID, self.peak_cpu_id as u32),
            (res::PEAK_CPU_UTIL, self.peak_cpu_util.to_bits()),
            (res::VENDOR, self.vendor as u32),
            (res::DEVICE, self.device as u32),
            (res::SUBVENDOR, self.subvendor as u32),
            (res::SUBDEVICE, self.subdevice as u32),
            (res::TRANSPORT_RETRANS, self.transport_retrans as u32),
        ];
        for (i, v) in ints {
            m.set_word(i, v);
        }
        m.set_bytes(res::IFNAME_AT, &self.ifname);
        m.set_bytes(res::DRIVER_AT, &self.driver);
        m.set_bytes(res::VERSION_AT, &self.version);
        m.set_bytes(res::FIRMWARE_AT, &self.firmware);
        m.set_bytes(res::BUS_AT, &self.bus);
        m.set_bytes(res::IFSLOT_AT, &self.ifslot);
        m.set_bytes(res::CONG_CONTROL_AT, &self.cong_control);
        m
    }

    /// Reads the layout from any message.
    pub fn decode(m: &Message) -> Self {
        let i = |w: usize| m.word(w) as i32;
        let u = |w: usize| m.word(w);
        let f = |w: usize| f32::from_bits(m.word(w));
        let wide = |hi: usize, lo: usize| (u64::from(u(hi)) << 32) | u64::from(u(lo));
        Self {
            errno: m.status,
            bytes_received: wide(res::BYTES_RECEIVED_HI, res::BYTES_RECEIVED_LO),
            recv_calls: u(res::RECV_CALLS),
            recv_buf_size: i(res::RECV_BUF_SIZE),
            bytes_sent: wide(res::BYTES_SENT_HI, res::BYTES_SENT_LO),
            send_calls: u(res::SEND_CALLS),
            send_buf_size: i(res::SEND_BUF_SIZE),
            failed_sends: u(res::FAILED_SENDS),
            trans_received: u(res::TRANS_RECEIVED),
            elapsed_time: f(res::ELAPSED_TIME),
            cpu_util: f(res::CPU_UTIL),
            cpu_percent_user: f(res::CPU_PERCENT_USER),
            cpu_percent_system: f(res::CPU_PERCENT_SYSTEM),
            cpu_percent_iowait: f(res::CPU_PERCENT_IOWAIT),
            cpu_percent_irq: f(res::CPU_PERCENT_IRQ),
            cpu_percent_swintr: f(res::CPU_PERCENT_SWINTR),
            serv_dem: f(res::SERV_DEM),
            cpu_method: u(res::CPU_METHOD),
            num_cpus: u(res::NUM_CPUS),
            peak_cpu_id: i(res::PEAK_CPU_ID),
            peak_cpu_util: f(res::PEAK_CPU_UTIL),
            vendor: i(res::VENDOR),
            device: i(res::DEVICE),
            subvendor: i(res::SUBVENDOR),
            subdevice: i(res::SUBDEVICE),
            transport_retrans: i(res::TRANSPORT_RETRANS),
            ifname: array(m, res::IFNAME_AT),
            driver: array(m, res::DRIVER_AT),
            version: array(m, res::VERSION_AT),
            firmware: array(m, res::FIRMWARE_AT),
            bus: array(m, res::BUS_AT),
            ifslot: array(m, res::IFSLOT_AT),
            cong_control: array(m, res::CONG_CONTROL_AT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stock `netperf -t TCP_STREAM -l 1 -- -m 1024 -S 65536` request's words (2.7.1).
    fn captured_stream_request() -> Message {
        let mut m = Message::new(super::super::code::DO_OMNI, -1);
        let words: [u32; 38] = [
            0x10000,
            u32::MAX,
            8,
            0,
            17,
            u32::MAX,
            0x10000,
            u32::MAX,
            8,
            0,
            0,
            u32::MAX,
            0x20,
            0,
            1,
            0,
            0,
            u32::MAX,
            u32::MAX,
            u32::MAX,
            0,
            4,
            1,
            6,
            4,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            u32::MAX,
            u32::MAX,
        ];
        for (i, w) in words.into_iter().enumerate() {
            m.set_word(i, w);
        }
        m
    }

    #[test]
    fn a_stock_request_reads_as_tcp_stream() {
        let r = OmniRequest::decode(&captured_stream_request());
        assert_eq!(r.kind(), Ok(TestKind::TcpStream));
        assert_eq!((r.send_buf_size, r.recv_buf_size, r.receive_size), (65536, 65536, -1));
        assert_eq!((r.end(), r.family(), r.affinity), (TestEnd::Seconds(1), Some(Family::V4), -1));
        assert_eq!(r.congestion_control(), None);
        assert_eq!(r.encode(), captured_stream_request());
    }

    #[test]
    fn every_kind_and_what_is_refused() {
        let base = OmniRequest::decode(&captured_stream_request());
        let with = |protocol, st, dir, flags, rr: bool| OmniRequest {
            protocol,
            socket_type: st,
            direction: dir,
            flags,
            request_size: if rr { 1 } else { -1 },
            response_size: if rr { 1 } else { -1 },
            ..base
        };
        let both = direction::XMIT | direction::RECV;
        let c = flag::CONNECT_TEST;
        assert_eq!(with(PROTO_TCP, 1, direction::XMIT, 0, false).kind(), Ok(TestKind::TcpMaerts));
        assert_eq!(with(PROTO_UDP, 2, direction::RECV, 0, false).kind(), Ok(TestKind::UdpStream));
        assert_eq!(with(PROTO_TCP, 1, both, 0, true).kind(), Ok(TestKind::TcpRr));
        assert_eq!(with(PROTO_UDP, 2, both, 0, true).kind(), Ok(TestKind::UdpRr));
        assert_eq!(with(PROTO_TCP, 1, both, c, true).kind(), Ok(TestKind::TcpCrr));
        // TCP_CC (no data), UDP from the server, SCTP, bidirectional streams.
        for r in [
            with(PROTO_TCP, 1, 0, c, true),
            with(PROTO_UDP, 2, direction::XMIT, 0, false),
            with(132, 1, direction::RECV, 0, false),
            with(PROTO_TCP, 1, both, 0, false),
        ] {
            let e = r.kind().unwrap_err();
            assert!(e.contains("does not run") && e.contains("TCP_CRR"), "{e}");
        }
    }
}
