//! AF_XDP transmit: an XDP socket bound to one queue of one interface, sending whole Ethernet
//! frames that the caller writes straight into the socket's UMEM, past the kernel's socket,
//! UDP, IP, neighbour and qdisc layers (Documentation/networking/af_xdp.rst).
//!
//! The UMEM is one anonymous mapping cut into [`FRAME_SIZE`]-byte frames. A free frame is
//! written, its descriptor (address, length) is put on the TX ring, and the kernel hands the
//! frame back on the completion ring once the driver is done with it. Zero-copy mode lets the
//! NIC read the UMEM itself; a driver without it (veth, most virtual devices) gets copy mode,
//! where each `sendto` kick makes the kernel copy the queued frames into socket buffers and
//! transmit them from the caller's context, at most 32 a call (`TX_BATCH_SIZE`; `EAGAIN` then
//! means "call again", not an error).
//!
//! A transmit-only socket needs no XDP program. Creating one needs `CAP_NET_RAW` (and to bind
//! it the interface must exist and be up); each refusal becomes one [`XdpError`] line that
//! names the reason.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use thiserror::Error;

/// Bytes per UMEM frame: a whole Ethernet frame up to a 1500-byte MTU fits, with room.
pub const FRAME_SIZE: u32 = 2048;
/// Frames in the UMEM: what may be in flight (queued or not yet completed) at once.
const FRAMES: u32 = 4096;
/// Entries of the TX and completion rings (powers of two, as the kernel requires).
const RING_SIZE: u32 = 2048;
/// The fill ring is only for receiving; the kernel still wants one on a UMEM's first socket.
const FILL_RING_SIZE: u32 = 64;
/// Kicks one [`XdpTx::transmit`] makes, at most, before it leaves what is still queued for the
/// next call (a driver that stays busy must not hold the sender past its stop flag).
const MAX_KICKS: u32 = 256;
/// How long a bind retries a queue that is still busy with a socket closed just before.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether frames leave by copy or straight from the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// The kernel copies each frame into a socket buffer (drivers without zero-copy, veth).
    Copy,
    /// The driver reads the UMEM directly.
    ZeroCopy,
}

impl XdpMode {
    /// `copy` or `zerocopy`, as results and summaries name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::ZeroCopy => "zerocopy",
        }
    }
}

/// Why an AF_XDP socket could not be made: one line naming the reason and what to do.
#[derive(Debug, Error)]
pub enum XdpError {
    /// No such interface in this network namespace.
    #[error("--xdp {0}: no such interface in this network namespace")]
    NoInterface(String),
    /// The caller lacks the capability.
    #[error("--xdp needs root (CAP_NET_RAW and CAP_NET_ADMIN to open an AF_XDP socket): {0}")]
    NotPermitted(io::Error),
    /// The kernel has no AF_XDP sockets.
    #[error("--xdp: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS): {0}")]
    Unsupported(io::Error),
    /// The interface refused the bind (down, no such queue, no XDP support).
    #[error("--xdp {interface}:{queue}: the interface refused an AF_XDP socket ({source}); is it up, and does it have queue {queue}?")]
    Bind {
        /// The interface.
        interface: String,
        /// The queue asked for.
        queue: u32,
        /// The kernel's errno.
        source: io::Error,
    },
    /// Any other step of the set-up.
    #[error("--xdp: {step}: {source}")]
    Setup {
        /// The step that failed.
        step: &'static str,
        /// The kernel's errno.
        source: io::Error,
    },
}

fn setup(step: &'static str) -> impl FnOnce(io::Error) -> XdpError {
    move |source| XdpError::Setup { step, source }
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn interface_index(name: &str) -> Result<u32, XdpError> {
    let c = std::ffi::CString::new(name).map_err(|_| XdpError::NoInterface(name.to_string()))?;
    // SAFETY: `c` is a live NUL-terminated string for the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(XdpError::NoInterface(name.to_string()));
    }
    Ok(index)
}

/// The hardware (MAC) address of interface `name` (`SIOCGIFHWADDR`).
pub fn interface_mac(name: &str) -> io::Result<[u8; 6]> {
    /// `struct ifreq` as SIOCGIFHWADDR fills it: the name, then a `struct sockaddr`.
    #[repr(C)]
    struct IfReqHwAddr {
        name: [u8; libc::IFNAMSIZ],
        family: u16,
        data: [u8; 14],
        /// The rest of the ifreq union (24 bytes in all on 64-bit Linux).
        _pad: [u8; 8],
    }
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    let mut req = IfReqHwAddr { name: [0; libc::IFNAMSIZ], family: 0, data: [0; 14], _pad: [0; 8] };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: a plain datagram socket, owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    let fd = crate::check(fd)?;
    // SAFETY: `fd` was just returned by socket() and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `req` is a live, writable ifreq-sized struct for the call.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req as *mut IfReqHwAddr) };
    crate::check(ret)?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&req.data[..6]);
    Ok(mac)
}

/// One anonymous or socket mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping; the kernel picks the address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        Self::checked(ptr, len)
    }

    fn of_socket(fd: &OwnedFd, len: usize, offset: u64) -> io::Result<Self> {
        // SAFETY: maps a ring the socket owns at the kernel's documented page offset; the
        // mapping outlives every pointer into it (both live in the XdpTx that owns this).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        Self::checked(ptr, len)
    }

    fn checked(ptr: *mut libc::c_void, len: usize) -> io::Result<Self> {
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; nothing uses them after drop.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A single-producer or single-consumer ring shared with the kernel: two free-running u32
/// indices and an array of `size` entries.
struct Ring {
    /// The mapping the pointers below point into, unmapped when the ring drops.
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    entries: *mut u8,
    mask: u32,
}

impl Ring {
    fn map(fd: &OwnedFd, off: &libc::xdp_ring_offset, entry: usize, page_offset: u64) -> io::Result<Self> {
        let len = off.desc as usize + RING_SIZE as usize * entry;
        let map = Mapping::of_socket(fd, len, page_offset)?;
        let at = |o: u64| map.ptr.wrapping_add(o as usize);
        Ok(Self {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            entries: at(off.desc),
            mask: RING_SIZE - 1,
            _map: map,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: the index lies inside `map`, is 4-byte aligned (the kernel's layout) and lives
        // as long as `self`; the kernel only ever accesses it atomically too.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// What one [`XdpTx::transmit`] call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Transmitted {
    /// Frames put on the TX ring (each one's `write` was called).
    pub queued: usize,
    /// Frames the driver took but dropped (`NET_XMIT_DROP`, reported as `EBUSY` by the kick:
    /// a veth whose peer's backlog was full). They left the socket, so they count as sent;
    /// their receiver counts them lost.
    pub dropped_by_driver: u64,
}

/// A transmit-only AF_XDP socket with its UMEM, bound to one interface queue.
pub struct XdpTx {
    // Field order is drop order: the rings and the UMEM are unmapped before the socket closes.
    tx: Ring,
    completion: Ring,
    umem: Mapping,
    fd: OwnedFd,
    /// UMEM addresses of frames that are neither queued nor in flight.
    free: Vec<u64>,
    /// TX ring: our producer index (published with each batch).
    tx_head: u32,
    mode: XdpMode,
    /// Frames completed so far: they left through the driver (or were dropped by it).
    completed: u64,
}

impl XdpTx {
    /// A socket on `queue` of `interface`: zero-copy where the driver has it, copy mode
    /// otherwise, unless `force_copy`.
    pub fn open(interface: &str, queue: u32, force_copy: bool) -> Result<Self, XdpError> {
        let ifindex = interface_index(interface)?;
        // SAFETY: a fresh socket, owned at once below.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        let fd = crate::check(fd).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => XdpError::NotPermitted(e),
            Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT) => XdpError::Unsupported(e),
            _ => XdpError::Setup { step: "socket(AF_XDP)", source: e },
        })?;
        // SAFETY: `fd` was just returned by socket() and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let umem = Mapping::anonymous((FRAMES * FRAME_SIZE) as usize).map_err(setup("map the UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        set_option(&fd, libc::XDP_UMEM_REG, &reg).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => XdpError::NotPermitted(e),
            _ => XdpError::Setup { step: "register the UMEM", source: e },
        })?;
        set_option(&fd, libc::XDP_UMEM_FILL_RING, &FILL_RING_SIZE).map_err(setup("size the fill ring"))?;
        set_option(&fd, libc::XDP_UMEM_COMPLETION_RING, &RING_SIZE).map_err(setup("size the completion ring"))?;
        set_option(&fd, libc::XDP_TX_RING, &RING_SIZE).map_err(setup("size the TX ring"))?;
        // SAFETY: all-zero is a valid xdp_mmap_offsets (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` and `len` are live; `len` holds the struct's size.
        let ret = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut len,
            )
        };
        crate::check(ret).map_err(setup("read the ring offsets"))?;
        let tx = Ring::map(&fd, &off.tx, std::mem::size_of::<libc::xdp_desc>(), libc::XDP_PGOFF_TX_RING as u64)
            .map_err(setup("map the TX ring"))?;
        let completion = Ring::map(&fd, &off.cr, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)
            .map_err(setup("map the completion ring"))?;
        let bind = |flags: u16| {
            let addr = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags | libc::XDP_USE_NEED_WAKEUP,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: `addr` is a live sockaddr_xdp and its size is passed.
            let ret = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_xdp).cast(),
                    std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            crate::check(ret)
        };
        // A queue whose last AF_XDP socket just closed stays busy until the kernel's deferred
        // clean-up ran (EBUSY): asked again for up to BUSY_WAIT.
        let bind = |flags: u16| {
            let until = std::time::Instant::now() + BUSY_WAIT;
            loop {
                match bind(flags) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < until => {
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    other => return other,
                }
            }
        };
        // Zero-copy first; a driver without it refuses (EOPNOTSUPP), and copy mode follows.
        let mode = match (force_copy, bind(libc::XDP_ZEROCOPY)) {
            (false, Ok(_)) => XdpMode::ZeroCopy,
            _ => {
                bind(libc::XDP_COPY).map_err(|source| XdpError::Bind {
                    interface: interface.to_string(),
                    queue,
                    source,
                })?;
                XdpMode::Copy
            }
        };
        let free = (0..FRAMES).rev().map(|i| u64::from(i * FRAME_SIZE)).collect();
        let tx_head = tx.producer().load(Ordering::Relaxed);
        Ok(Self { tx, completion, umem, fd, free, tx_head, mode, completed: 0 })
    }

    /// Whether this process may send through an AF_XDP socket on `interface`: it exists and
    /// an AF_XDP socket can be made (root). Binds nothing, so the queue stays free for the
    /// sender that follows; what only the bind can tell (a queue the interface lacks) is
    /// the sender's to say.
    pub fn check(interface: &str) -> Result<(), XdpError> {
        interface_index(interface)?;
        // SAFETY: a fresh socket, owned (and so closed) at once.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        let fd = crate::check(fd).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => XdpError::NotPermitted(e),
            Some(libc::EAFNOSUPPORT | libc::EPROTONOSUPPORT) => XdpError::Unsupported(e),
            _ => XdpError::Setup { step: "socket(AF_XDP)", source: e },
        })?;
        // SAFETY: `fd` was just returned by socket() and nothing else owns it.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(())
    }

    /// How frames leave.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Frames the driver has handed back so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Frames queued or in flight, not yet handed back.
    pub fn in_flight(&self) -> usize {
        FRAMES as usize - self.free.len()
    }

    /// Takes the completed frames back into the free list.
    fn reap(&mut self) {
        let ring = &self.completion;
        let head = ring.producer().load(Ordering::Acquire);
        let mut tail = ring.consumer().load(Ordering::Relaxed);
        while tail != head {
            let slot = (tail & ring.mask) as usize * 8;
            // SAFETY: `slot` indexes one of the ring's RING_SIZE u64 entries inside its
            // mapping; the kernel published it before the producer index we acquired.
            let addr = unsafe { ring.entries.add(slot).cast::<u64>().read_unaligned() };
            self.free.push(addr);
            tail = tail.wrapping_add(1);
            self.completed += 1;
        }
        ring.consumer().store(tail, Ordering::Release);
    }

    /// Queues up to `max` frames, calling `write(i, frame)` for each to write frame `i` of the
    /// batch (the whole [`FRAME_SIZE`] buffer is its to use) and return its length, then kicks
    /// the kernel to send them. Fewer are queued when the UMEM or the ring is short of room
    /// (frames still in flight): `queued` says how many.
    pub fn transmit(
        &mut self,
        max: usize,
        mut write: impl FnMut(usize, &mut [u8]) -> usize,
    ) -> io::Result<Transmitted> {
        self.reap();
        let ring_free = RING_SIZE - self.tx_head.wrapping_sub(self.tx.consumer().load(Ordering::Acquire));
        let n = max.min(self.free.len()).min(ring_free as usize);
        for i in 0..n {
            let addr = self.free.pop().expect("counted above");
            // SAFETY: `addr` is a frame offset below FRAMES * FRAME_SIZE handed out by this
            // socket, not queued or in flight (it came from the free list), so nothing else
            // reads or writes these FRAME_SIZE bytes until its descriptor is published.
            let frame =
                unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(addr as usize), FRAME_SIZE as usize) };
            let len = write(i, frame).min(FRAME_SIZE as usize);
            let desc = libc::xdp_desc { addr, len: len as u32, options: 0 };
            let slot = (self.tx_head & self.tx.mask) as usize * std::mem::size_of::<libc::xdp_desc>();
            // SAFETY: `slot` indexes one of the TX ring's RING_SIZE descriptors, one the kernel
            // has consumed (ring_free above), so it reads it only after the producer moves.
            unsafe { self.tx.entries.add(slot).cast::<libc::xdp_desc>().write_unaligned(desc) };
            self.tx_head = self.tx_head.wrapping_add(1);
        }
        if n > 0 {
            self.tx.producer().store(self.tx_head, Ordering::Release);
        }
        let dropped_by_driver = self.kick()?;
        Ok(Transmitted { queued: n, dropped_by_driver })
    }

    /// Makes the kernel send what is queued: copy mode sends from this call, 32 frames a
    /// `sendto`; zero-copy only when the driver asks to be woken. Returns the frames the
    /// driver dropped.
    fn kick(&mut self) -> io::Result<u64> {
        let mut dropped = 0;
        for _ in 0..MAX_KICKS {
            let pending = self.tx_head != self.tx.consumer().load(Ordering::Acquire);
            if !pending || (self.mode == XdpMode::ZeroCopy && !self.tx.needs_wakeup()) {
                break;
            }
            // SAFETY: a zero-length sendto with no buffer and no address: the AF_XDP kick.
            let ret = unsafe {
                libc::sendto(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
            };
            if ret >= 0 {
                continue;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The copy-mode batch limit, or a driver queue that is full for now.
                Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR) => {}
                Some(libc::EBUSY) => dropped += 1,
                _ => return Err(e),
            }
        }
        self.reap();
        Ok(dropped)
    }

    /// Kicks and reaps until every queued frame is handed back or `wait` passes.
    pub fn drain(&mut self, wait: std::time::Duration) -> io::Result<u64> {
        let until = std::time::Instant::now() + wait;
        let mut dropped = 0;
        while self.in_flight() > 0 && std::time::Instant::now() < until {
            dropped += self.kick()?;
            if self.in_flight() > 0 {
                std::thread::yield_now();
            }
        }
        Ok(dropped)
    }

    /// Descriptors the kernel found invalid (`XDP_STATISTICS`): frames that never left.
    pub fn invalid_descriptors(&self) -> io::Result<u64> {
        // SAFETY: all-zero is a valid xdp_statistics (plain integers).
        let mut stats: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are live; `len` holds the struct's size.
        let ret = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut stats as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        crate::check(ret)?;
        Ok(stats.tx_invalid_descs)
    }
}

/// A SOL_XDP socket option of type `T`.
fn set_option<T>(fd: &OwnedFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T for the call and its size is passed.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    crate::check(ret).map(|_| ())
}

/// The Internet checksum's one's-complement sum of `bytes` (as big-endian 16-bit words, an odd
/// last byte padded with zero), added to `sum`, not folded.
pub fn checksum_add(mut sum: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes(c.try_into().expect("8 bytes"));
        sum = sum.wrapping_add(w >> 32).wrapping_add(w & 0xffff_ffff);
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        sum += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// Folds a sum of [`checksum_add`] to 16 bits and complements it: the checksum field.
pub fn checksum_fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_rfc_1071s_example_and_odd_lengths() {
        // RFC 1071, section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let sum = checksum_add(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]);
        assert_eq!(checksum_fold(sum), !0xddf2);
        // Split anywhere on an even boundary, the sum is the same.
        let bytes: Vec<u8> = (0..=200u8).collect();
        let whole = checksum_fold(checksum_add(0, &bytes));
        let split = checksum_fold(checksum_add(checksum_add(0, &bytes[..64]), &bytes[64..]));
        assert_eq!(whole, split);
        // An odd tail is padded with a zero byte.
        assert_eq!(checksum_fold(checksum_add(0, &[0x12])), !0x1200);
    }

    #[test]
    fn an_unknown_interface_is_refused_by_name() {
        let e = XdpTx::open("nosuchif0", 0, false).err().expect("no such interface");
        assert_eq!(e.to_string(), "--xdp nosuchif0: no such interface in this network namespace");
    }
}
