//! The kernel's XDP live-frames mode as a sender (`--xdp-live`): `BPF_PROG_TEST_RUN` with
//! `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux 5.18) runs an XDP program over frames the kernel keeps
//! in a page pool and carries out its verdict for real. The program here writes each frame's
//! sequence number (from a counter in a map) and send time (`bpf_ktime_get_ns` less the test's
//! start) into the datagram's header, big-endian, then redirects the frame to the interface
//! (`bpf_redirect`): the driver's `ndo_xdp_xmit` takes it as an `xdp_frame`, with no socket
//! and no socket buffer per frame (bench/README.md, "xdp.sh": 4 times the kernel's UDP path
//! with GSO on a veth pair, where AF_XDP's copy mode builds a socket buffer per frame).
//!
//! Every frame is the template given, but for those two fields: the payload is constant and
//! the UDP checksum is not recomputed (the caller sends IPv4 with checksum 0). The counter is
//! the number of frames the program ran on; a frame the driver could not take (a full veth
//! ring) counts as sent and its receiver counts it lost, as on a wire.

use crate::xdp_count::{
    bpf, insn, load_named, owned, ADD64_K, BPF_MAP_CREATE, BPF_MAP_LOOKUP_ELEM, CALL, EXIT, HELPER_MAP_LOOKUP, JEQ_K,
    JGT_X, LDX_DW, LDX_W, LD_IMM64, MOV64_K, MOV64_X, PSEUDO_MAP_FD, STX_DW, ST_W, TO_BE, XDP_DROP,
};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
const HELPER_KTIME_GET_NS: i32 = 5;
const HELPER_REDIRECT: i32 = 23;
/// `BPF_ALU64 | BPF_SUB | BPF_X`.
const SUB64_X: u8 = 0x1f;

/// Where the program writes each frame's two fields: byte offsets from the frame's start of
/// the 64-bit big-endian sequence number and send time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StampAt {
    /// The sequence number's offset.
    pub sequence: usize,
    /// The send time's offset (nanoseconds since `base_ns` of CLOCK_MONOTONIC).
    pub sent_ns: usize,
}

/// The live-frames sender of one stream: the program, its counter, the template frame.
pub struct XdpLive {
    program: OwnedFd,
    counter: OwnedFd,
    frame: Vec<u8>,
    ifindex: u32,
}

impl XdpLive {
    /// Loads the program that stamps `frame` at `at` and redirects it to interface
    /// `ifindex`; send times count from `base_ns` of CLOCK_MONOTONIC.
    pub fn new(ifindex: u32, frame: Vec<u8>, at: StampAt, base_ns: u64) -> io::Result<Self> {
        let len = frame.len();
        if at.sequence + 8 > len || at.sent_ns + 8 > len || len > i16::MAX as usize {
            return Err(io::Error::other("--xdp-live: the fields to stamp lie outside the frame"));
        }
        let mut attr = [0u32; 18];
        attr[0] = BPF_MAP_TYPE_ARRAY;
        attr[1] = 4;
        attr[2] = 8;
        attr[3] = 1;
        let counter = bpf(BPF_MAP_CREATE, &mut attr).map(owned)?;
        let program = load_named(&assemble(counter.as_raw_fd(), ifindex, len, at, base_ns), b"netchar_live")?;
        Ok(Self { program, counter, frame, ifindex })
    }

    /// Sends `n` frames: one system call, the frames in the kernel's batches.
    pub fn send(&self, n: u32) -> io::Result<()> {
        let mut ctx = [0u32; 6]; // struct xdp_md: data, data_end, data_meta, ingress_ifindex, ...
        ctx[1] = self.frame.len() as u32;
        ctx[3] = self.ifindex;
        let mut attr = TestRun {
            prog_fd: self.program.as_raw_fd() as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat: n,
            ctx_size_in: std::mem::size_of_val(&ctx) as u32,
            ctx_in: ctx.as_ptr() as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            ..TestRun::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr).map(|_| ())
    }

    /// Frames the program has stamped and passed on so far: the next sequence number.
    pub fn sent(&self) -> io::Result<u64> {
        let key: u32 = 0;
        let mut value: u64 = 0;
        let mut attr = [0u64; 4];
        attr[0] = self.counter.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = &mut value as *mut u64 as u64;
        bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
        Ok(value)
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of `bpf_ktime_get_ns` and of Rust's
/// `Instant` on Linux.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `union bpf_attr` as BPF_PROG_TEST_RUN reads it (linux/bpf.h, `test`).
#[repr(C)]
#[derive(Default)]
struct TestRun {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// The program. r6 the context, r7 the frame's start (checked to hold `len` bytes), r8 the
/// sequence number, r0/r1 scratch.
fn assemble(map_fd: i32, ifindex: u32, len: usize, at: StampAt, base_ns: u64) -> Vec<u64> {
    let mut p = vec![
        insn(MOV64_X, 6, 1, 0, 0),
        insn(LDX_W, 7, 6, 0, 0), // r7 = ctx->data
        insn(LDX_W, 3, 6, 4, 0), // r3 = ctx->data_end
        insn(MOV64_X, 4, 7, 0, 0),
        insn(ADD64_K, 4, 0, 0, len as i32),
    ];
    let drop_from = |p: &Vec<u64>, total: usize| (total - p.len() - 1) as i16;
    // The program's length is fixed: the jumps to `drop` are written against it.
    const TOTAL: usize = 31;
    p.push(insn(JGT_X, 4, 3, drop_from(&p, TOTAL - 2), 0)); // if r4 > r3 goto drop
    p.extend([
        insn(ST_W, 10, 0, -4, 0), // key 0 on the stack
        insn(MOV64_X, 2, 10, 0, 0),
        insn(ADD64_K, 2, 0, 0, -4),
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),
        0,
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP),
    ]);
    p.push(insn(JEQ_K, 0, 0, drop_from(&p, TOTAL - 2), 0)); // if r0 == 0 goto drop
    p.extend([
        insn(LDX_DW, 8, 0, 0, 0), // r8 = the counter
        insn(MOV64_X, 1, 8, 0, 0),
        insn(ADD64_K, 1, 0, 0, 1),
        insn(STX_DW, 0, 1, 0, 0), // counter = r8 + 1 (one CPU runs the test: no atomic needed)
        insn(TO_BE, 8, 0, 0, 64),
        insn(STX_DW, 7, 8, at.sequence as i16, 0),
        insn(CALL, 0, 0, 0, HELPER_KTIME_GET_NS),
        insn(LD_IMM64, 1, 0, 0, base_ns as u32 as i32),
        insn(0, 0, 0, 0, (base_ns >> 32) as u32 as i32),
        insn(SUB64_X, 0, 1, 0, 0),
        insn(TO_BE, 0, 0, 0, 64),
        insn(STX_DW, 7, 0, at.sent_ns as i16, 0),
        insn(MOV64_K, 1, 0, 0, ifindex as i32),
        insn(MOV64_K, 2, 0, 0, 0),
        insn(CALL, 0, 0, 0, HELPER_REDIRECT),
        insn(EXIT, 0, 0, 0, 0),
        // drop:
        insn(MOV64_K, 0, 0, 0, XDP_DROP),
        insn(EXIT, 0, 0, 0, 0),
    ]);
    debug_assert_eq!(p.len(), TOTAL);
    p
}
