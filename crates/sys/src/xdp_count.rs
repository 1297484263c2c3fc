//! An XDP program that counts and drops a UDP port's datagrams at the driver, before the
//! kernel builds a socket buffer for them: the sink end of a packet-rate measurement, whose
//! count is ground truth for what arrived (`netchar xdp-count`).
//!
//! The program is 40-odd eBPF instructions assembled here and loaded with the `bpf()` system
//! call; its counter is a per-CPU array map of one (packets, bytes) entry, summed over the
//! CPUs when read. It matches Ethernet frames carrying IPv4 (no IP options) or IPv6 (no
//! extension headers) UDP to the port, counts and drops those, and passes everything else
//! (ARP, neighbour discovery, a control connection) on to the stack.
//!
//! Why no BPF crate: aya and libbpf-rs load ELF objects that a BPF toolchain (clang's BPF
//! target, or bpf-linker with a nightly Rust) compiles, a build step and toolchain netchar's
//! build does not otherwise need, for a program this small; the three `bpf()` commands used
//! here (`BPF_MAP_CREATE`, `BPF_PROG_LOAD`, `BPF_LINK_CREATE`) plus the map read are the
//! whole interface it needs.
//!
//! The program is attached with a BPF link (Linux 5.9): the kernel detaches it when the
//! link's last descriptor closes, so a counter that ends by Ctrl-C, a panic or a kill leaves
//! no program behind on the interface.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use thiserror::Error;

// bpf() commands, map and program types, attach type (linux/bpf.h).
pub(crate) const BPF_MAP_CREATE: libc::c_long = 0;
pub(crate) const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// Attach flags (linux/if_link.h): the driver's own XDP hook, or the generic one.
const XDP_FLAGS_SKB_MODE: u32 = 2;
const XDP_FLAGS_DRV_MODE: u32 = 4;
pub(crate) const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;
/// `bpf_map_lookup_elem`, helper 1.
pub(crate) const HELPER_MAP_LOOKUP: i32 = 1;

/// Why the counter could not be attached: one line naming the reason.
#[derive(Debug, Error)]
pub enum XdpCountError {
    /// No such interface here.
    #[error("xdp-count {0}: no such interface in this network namespace")]
    NoInterface(String),
    /// The caller lacks CAP_BPF / CAP_NET_ADMIN.
    #[error("xdp-count needs root (CAP_BPF and CAP_NET_ADMIN to load and attach an XDP program): {0}")]
    NotPermitted(io::Error),
    /// The kernel refused the program, the map or the attachment.
    #[error("xdp-count {interface}: {step}: {source}")]
    Kernel {
        /// The interface.
        interface: String,
        /// What was being done.
        step: &'static str,
        /// The kernel's errno.
        source: io::Error,
    },
}

/// How the program runs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttachMode {
    /// In the driver (native XDP; veth has it).
    Driver,
    /// The generic hook, after the socket buffer is built: for drivers without XDP.
    Generic,
}

impl XdpAttachMode {
    /// `native` or `generic`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Driver => "native",
            Self::Generic => "generic",
        }
    }
}

/// Datagrams and bytes (Ethernet frames, without the FCS) the program counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpCounts {
    /// Frames counted and dropped.
    pub packets: u64,
    /// Their bytes from the Ethernet header on.
    pub bytes: u64,
}

/// The count-and-drop program, attached; detached when dropped.
pub struct XdpCounter {
    // Field order is drop order: the link (and with it the attachment) goes first.
    _link: OwnedFd,
    _program: OwnedFd,
    map: OwnedFd,
    mode: XdpAttachMode,
}

impl XdpCounter {
    /// Loads the program for UDP port `port` and attaches it to `interface`: in the driver
    /// where it takes it, the generic hook otherwise.
    pub fn attach(interface: &str, port: u16) -> Result<Self, XdpCountError> {
        let ifindex =
            crate::xdp::interface_index(interface).map_err(|_| XdpCountError::NoInterface(interface.into()))?;
        let kernel = |step: &'static str| {
            move |source: io::Error| match source.raw_os_error() {
                Some(libc::EPERM) => XdpCountError::NotPermitted(source),
                _ => XdpCountError::Kernel { interface: interface.to_string(), step, source },
            }
        };
        let map = create_map().map_err(kernel("create the counter map"))?;
        let program = load_program(&assemble(map.as_raw_fd(), port)).map_err(kernel("load the XDP program"))?;
        let (link, mode) = match link(&program, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(l) => (l, XdpAttachMode::Driver),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Err(XdpCountError::NotPermitted(e)),
            // EBUSY: another program is attached already; no generic fallback would help.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(kernel("attach (another XDP program is attached; detach it first)")(e))
            }
            Err(_) => (
                link(&program, ifindex, XDP_FLAGS_SKB_MODE).map_err(kernel("attach the XDP program"))?,
                XdpAttachMode::Generic,
            ),
        };
        Ok(Self { _link: link, _program: program, map, mode })
    }

    /// Where the program runs.
    pub fn mode(&self) -> XdpAttachMode {
        self.mode
    }

    /// The counts so far, summed over every CPU.
    pub fn counts(&self) -> io::Result<XdpCounts> {
        let cpus = possible_cpus()?;
        let mut values = vec![0u64; cpus * 2];
        let key: u32 = 0;
        let mut attr = [0u64; 4];
        attr[0] = self.map.as_raw_fd() as u64;
        attr[1] = &key as *const u32 as u64;
        attr[2] = values.as_mut_ptr() as u64;
        bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
        let mut c = XdpCounts::default();
        for cpu in values.chunks_exact(2) {
            c.packets += cpu[0];
            c.bytes += cpu[1];
        }
        Ok(c)
    }
}

/// The `bpf()` system call with an attribute struct of any size.
pub(crate) fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, writable, zero-padded attribute struct of the size passed;
    // every pointer inside it points at memory live for the call.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>() as u32) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

pub(crate) fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` is a descriptor bpf() just returned, owned by nothing else.
    unsafe { OwnedFd::from_raw_fd(fd as i32) }
}

/// A per-CPU array of one entry: (packets, bytes).
fn create_map() -> io::Result<OwnedFd> {
    // map_type, key_size, value_size, max_entries, then flags and the rest zero.
    let mut attr = [0u32; 18];
    attr[0] = BPF_MAP_TYPE_PERCPU_ARRAY;
    attr[1] = 4;
    attr[2] = 16;
    attr[3] = 1;
    bpf(BPF_MAP_CREATE, &mut attr).map(owned)
}

/// `union bpf_attr` as BPF_PROG_LOAD reads it, up to `expected_attach_type`.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

fn load_program(insns: &[u64]) -> io::Result<OwnedFd> {
    load_named(insns, b"netchar_count")
}

/// Loads an XDP program named `label` (at most 15 bytes), with the verifier's last line in
/// the error when it refuses.
pub(crate) fn load_named(insns: &[u64], label: &[u8]) -> io::Result<OwnedFd> {
    let license = b"Dual MIT/GPL\0";
    let mut name = [0u8; 16];
    name[..label.len().min(15)].copy_from_slice(&label[..label.len().min(15)]);
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = ProgLoad {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
        prog_ifindex: 0,
        expected_attach_type: BPF_XDP,
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(e),
        Err(first) => {
            // Load again with the verifier's log, so the refusal says why.
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            match bpf(BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(owned(fd)),
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
                    Err(io::Error::new(first.kind(), format!("{first}; the verifier: {last}")))
                }
            }
        }
    }
}

/// A BPF link attaching `program` to interface `ifindex`'s XDP hook.
fn link(program: &OwnedFd, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    // prog_fd, target_ifindex, attach_type, flags, then zeros.
    let mut attr = [0u32; 16];
    attr[0] = program.as_raw_fd() as u32;
    attr[1] = ifindex;
    attr[2] = BPF_XDP;
    attr[3] = flags;
    bpf(BPF_LINK_CREATE, &mut attr).map(owned)
}

/// CPUs the kernel may ever run (`/sys/devices/system/cpu/possible`, e.g. `0-1`): a per-CPU
/// map holds a value for each.
fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut n = 0;
    for part in text.trim().split(',') {
        let bad = || io::Error::other(format!("cannot read the possible CPUs from {text:?}"));
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.parse().map_err(|_| bad())?, hi.parse().map_err(|_| bad())?);
        n = n.max(hi + 1);
        let _ = lo;
    }
    Ok(n)
}

/// An eBPF instruction: opcode, registers, offset, immediate (linux/bpf.h `struct bpf_insn`).
pub(crate) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let bytes = [
        [code, dst | (src << 4)],
        off.to_le_bytes(),
        [imm.to_le_bytes()[0], imm.to_le_bytes()[1]],
        [imm.to_le_bytes()[2], imm.to_le_bytes()[3]],
    ];
    u64::from_ne_bytes(bytes.concat().try_into().expect("8 bytes"))
}

// Opcodes (class | size/op | mode/source).
pub(crate) const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
pub(crate) const LDX_DW: u8 = 0x79;
pub(crate) const STX_DW: u8 = 0x7b;
pub(crate) const ST_W: u8 = 0x62;
pub(crate) const MOV64_X: u8 = 0xbf;
pub(crate) const MOV64_K: u8 = 0xb7;
pub(crate) const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
pub(crate) const TO_BE: u8 = 0xdc;
pub(crate) const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
pub(crate) const JGT_X: u8 = 0x2d;
const JA: u8 = 0x05;
pub(crate) const CALL: u8 = 0x85;
pub(crate) const EXIT: u8 = 0x95;
pub(crate) const LD_IMM64: u8 = 0x18;
pub(crate) const PSEUDO_MAP_FD: u8 = 1;

/// Jump targets of the program.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Label {
    V4,
    V6,
    Count,
    Drop,
    Pass,
}

/// The program for UDP port `port` with the counter map `map_fd`. Registers: r2 the frame's
/// start, r3 its end, r4 bounds checks, r5 fields read, r7 the frame's length.
fn assemble(map_fd: i32, port: u16) -> Vec<u64> {
    // A 16-bit load reads the port's bytes as they lie in memory (network order).
    let port_in_memory = i32::from(u16::from_ne_bytes(port.to_be_bytes()));
    enum Op {
        I(u64),
        Jump(u8, u8, i32, Label),
        Mark(Label),
    }
    use Label::*;
    use Op::*;
    let ops = [
        I(insn(LDX_W, 2, 1, 0, 0)), // r2 = ctx->data
        I(insn(LDX_W, 3, 1, 4, 0)), // r3 = ctx->data_end
        I(insn(MOV64_X, 4, 2, 0, 0)),
        I(insn(ADD64_K, 4, 0, 0, 14)),
        Jump(JGT_X, 4, 3, Pass), // shorter than an Ethernet header
        I(insn(LDX_H, 5, 2, 12, 0)),
        Jump(JEQ_K, 5, i32::from(u16::from_ne_bytes([0x08, 0x00])), V4),
        Jump(JEQ_K, 5, i32::from(u16::from_ne_bytes([0x86, 0xdd])), V6),
        Jump(JA, 0, 0, Pass),
        Mark(V4),
        I(insn(MOV64_X, 4, 2, 0, 0)),
        I(insn(ADD64_K, 4, 0, 0, 14 + 20 + 8)),
        Jump(JGT_X, 4, 3, Pass),
        I(insn(LDX_B, 5, 2, 14, 0)),
        Jump(JNE_K, 5, 0x45, Pass), // IPv4 without options
        I(insn(LDX_B, 5, 2, 14 + 9, 0)),
        Jump(JNE_K, 5, 17, Pass), // UDP
        I(insn(LDX_H, 5, 2, 14 + 20 + 2, 0)),
        Jump(JNE_K, 5, port_in_memory, Pass),
        I(insn(LDX_H, 7, 2, 14 + 2, 0)), // IPv4 total length
        I(insn(TO_BE, 7, 0, 0, 16)),
        I(insn(ADD64_K, 7, 0, 0, 14)),
        Jump(JA, 0, 0, Count),
        Mark(V6),
        I(insn(MOV64_X, 4, 2, 0, 0)),
        I(insn(ADD64_K, 4, 0, 0, 14 + 40 + 8)),
        Jump(JGT_X, 4, 3, Pass),
        I(insn(LDX_B, 5, 2, 14 + 6, 0)),
        Jump(JNE_K, 5, 17, Pass), // next header UDP
        I(insn(LDX_H, 5, 2, 14 + 40 + 2, 0)),
        Jump(JNE_K, 5, port_in_memory, Pass),
        I(insn(LDX_H, 7, 2, 14 + 4, 0)), // IPv6 payload length
        I(insn(TO_BE, 7, 0, 0, 16)),
        I(insn(ADD64_K, 7, 0, 0, 14 + 40)),
        Mark(Count),
        I(insn(ST_W, 10, 0, -4, 0)), // key 0 on the stack
        I(insn(MOV64_X, 2, 10, 0, 0)),
        I(insn(ADD64_K, 2, 0, 0, -4)),
        I(insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd)),
        I(0),
        I(insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP)),
        Jump(JEQ_K, 0, 0, Drop),
        // The map is per CPU: no other CPU writes this value, so plain adds suffice.
        I(insn(LDX_DW, 1, 0, 0, 0)),
        I(insn(ADD64_K, 1, 0, 0, 1)),
        I(insn(STX_DW, 0, 1, 0, 0)),
        I(insn(LDX_DW, 1, 0, 8, 0)),
        I(insn(ADD64_X, 1, 7, 0, 0)),
        I(insn(STX_DW, 0, 1, 8, 0)),
        Mark(Drop),
        I(insn(MOV64_K, 0, 0, 0, XDP_DROP)),
        I(insn(EXIT, 0, 0, 0, 0)),
        Mark(Pass),
        I(insn(MOV64_K, 0, 0, 0, XDP_PASS)),
        I(insn(EXIT, 0, 0, 0, 0)),
    ];
    // Each label's instruction index, then each jump's offset from the instruction after it.
    let mut at = Vec::new();
    let mut index = 0i32;
    for op in &ops {
        match op {
            Mark(l) => at.push((*l, index)),
            _ => index += 1,
        }
    }
    let target = |l: Label| at.iter().find(|(m, _)| *m == l).map(|&(_, i)| i).expect("every label is marked");
    let mut out = Vec::new();
    for op in ops {
        match op {
            I(i) => out.push(i),
            Jump(code, dst, operand, label) => {
                let off = (target(label) - out.len() as i32 - 1) as i16;
                out.push(match code {
                    JGT_X => insn(code, dst, operand as u8, off, 0),
                    _ => insn(code, dst, 0, off, operand),
                });
            }
            Mark(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_their_labels_and_the_program_ends_in_exits() {
        let p = assemble(3, 9000);
        let exit = insn(EXIT, 0, 0, 0, 0);
        assert_eq!(p.last(), Some(&exit));
        // Every jump's target is inside the program.
        for (i, w) in p.iter().enumerate() {
            let b = w.to_ne_bytes();
            if b[0] & 0x07 == 0x05 && b[0] != CALL && b[0] != EXIT {
                let off = i16::from_le_bytes([b[2], b[3]]) as i64;
                let to = i as i64 + 1 + off;
                assert!((0..p.len() as i64).contains(&to), "jump at {i} to {to}");
            }
        }
    }

    #[test]
    fn possible_cpus_are_at_least_the_online_ones() {
        assert!(possible_cpus().unwrap() >= crate::cpu::online_cpus() as usize);
    }

    #[test]
    fn a_missing_interface_is_refused_by_name() {
        let e = XdpCounter::attach("nosuchif0", 9).err().expect("no such interface");
        assert_eq!(e.to_string(), "xdp-count nosuchif0: no such interface in this network namespace");
    }
}
