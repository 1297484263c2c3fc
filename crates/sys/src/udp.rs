//! Batched UDP I/O: `sendmmsg`, UDP GSO (`UDP_SEGMENT`), `recvmmsg` with per-datagram kernel
//! receive timestamps (`SO_TIMESTAMPNS`), socket-queue drop counts (`SO_MEMINFO`) and UDP GRO.
//!
//! Shaped like quinn-udp: GSO is one argument (`segment`), GRO is [`RecvMeta::stride`]. Every
//! feature is probed and degrades to plain calls; errors are returned for the caller to
//! count, never swallowed (a measurement tool must count what it could not send).

use crate::{check, setsockopt_int};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Datagrams per `sendmmsg`/`recvmmsg` call.
pub const BATCH: usize = 64;
/// Segments per GSO send (the kernel's UDP_MAX_SEGMENTS was 64 until 2024).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// GSO super-datagrams per [`send_segmented_batch`]: one call per 512 datagrams of 64 B rather
/// than per 64 (bench/ref/udp_ref sends 8 a call too).
pub const GSO_MESSAGES: usize = 8;
/// Bytes a GRO receive buffer needs: the largest coalesced datagram.
pub const GRO_BUFFER: usize = 65_535;

/// Asks for a kernel receive timestamp with every datagram (SO_TIMESTAMPNS, CLOCK_REALTIME).
pub fn enable_rx_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Turns UDP GRO on (Linux 5.0): the kernel may hand over several datagrams as one.
pub fn enable_gro(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// True where the kernel accepts UDP_SEGMENT on this socket (Linux 4.18).
pub fn gso_supported(fd: BorrowedFd<'_>) -> bool {
    setsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
}

/// What a sender should make of a failed send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendFailure {
    /// The path cannot segment (a GSO send failed with EIO or EINVAL: no checksum offload):
    /// send unsegmented from now on.
    Unsegmentable,
    /// This send was refused but the socket is sound: count the datagrams as send errors
    /// (never as sent) and go on. A full queue (ENOBUFS, EAGAIN after the send timeout), a
    /// local firewall (EPERM from netfilter, EACCES from a prohibit route), or an ICMP error
    /// an earlier datagram brought back to the connected socket (ECONNREFUSED,
    /// EHOSTUNREACH, ENETUNREACH...), which the kernel reports once, on the next send; or a
    /// datagram larger than the path MTU on a don't-fragment socket (EMSGSIZE, `--df`: the
    /// path MTU may change, and every refusal is a figure of the test).
    Refused,
    /// Every later send would fail the same way (a closed or unusable socket): stop.
    Fatal,
}

/// Classifies the error of a [`send_many`] or (with `segmented`) a [`send_segmented`] call.
pub fn classify_send_error(err: &io::Error, segmented: bool) -> SendFailure {
    match err.raw_os_error() {
        Some(libc::EIO | libc::EINVAL) if segmented => SendFailure::Unsegmentable,
        Some(
            libc::EAGAIN
            | libc::EINTR
            | libc::ETIMEDOUT
            | libc::ENOBUFS
            | libc::ENOMEM
            | libc::EPERM
            | libc::EACCES
            | libc::ECONNREFUSED
            | libc::EHOSTUNREACH
            | libc::ENETUNREACH
            | libc::EHOSTDOWN
            | libc::ENETDOWN
            | libc::EMSGSIZE,
        ) => SendFailure::Refused,
        Some(_) => SendFailure::Fatal,
        None => match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => SendFailure::Refused,
            _ => SendFailure::Fatal,
        },
    }
}

/// A refused send's errno, for counting refusals by cause on the send path without naming
/// them there: `EAGAIN` for a send that timed out without one.
pub fn send_error_code(err: &io::Error) -> i32 {
    err.raw_os_error().unwrap_or(libc::EAGAIN)
}

/// The name of an errno as the C library defines it (`ENOBUFS`), for the result's count of
/// refused sends by cause; `errno N` for one not named here.
pub fn errno_name(code: i32) -> String {
    let named = [
        (libc::EAGAIN, "EAGAIN"),
        (libc::EINTR, "EINTR"),
        (libc::ETIMEDOUT, "ETIMEDOUT"),
        (libc::ENOBUFS, "ENOBUFS"),
        (libc::ENOMEM, "ENOMEM"),
        (libc::EPERM, "EPERM"),
        (libc::EACCES, "EACCES"),
        (libc::ECONNREFUSED, "ECONNREFUSED"),
        (libc::EHOSTUNREACH, "EHOSTUNREACH"),
        (libc::ENETUNREACH, "ENETUNREACH"),
        (libc::EHOSTDOWN, "EHOSTDOWN"),
        (libc::ENETDOWN, "ENETDOWN"),
        (libc::EMSGSIZE, "EMSGSIZE"),
        (libc::EIO, "EIO"),
        (libc::EINVAL, "EINVAL"),
    ];
    named.iter().find(|(c, _)| *c == code).map_or_else(|| format!("errno {code}"), |(_, n)| n.to_string())
}

/// Sends `count` datagrams of `len` bytes laid out back to back in `buf` with one
/// `sendmmsg`. Returns how many the kernel accepted (fewer on a full buffer).
pub fn send_many(fd: BorrowedFd<'_>, buf: &[u8], len: usize, count: usize) -> io::Result<usize> {
    let count = count.min(BATCH).min(buf.len() / len.max(1));
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid.
    let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..count {
        iov[i] = libc::iovec { iov_base: buf[i * len..].as_ptr() as *mut libc::c_void, iov_len: len };
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: the first `count` headers point at live iovecs, which point inside `buf`
    // (count·len ≤ buf.len()); the kernel only reads them.
    let n = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), count as libc::c_uint, 0) };
    check(n).map(|n| n as usize)
}

/// Sends `buf` as datagrams of `segment` bytes (the last may be shorter) in one call, with
/// UDP GSO. Returns the bytes accepted (all or an error: GSO sends are atomic).
pub fn send_segmented(fd: BorrowedFd<'_>, buf: &[u8], segment: u16) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    set_segment_size(&mut msg, &mut control, segment);
    // SAFETY: `msg` points at live iov (inside `buf`) and control buffers.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends `buf` as GSO super-datagrams of `per_message` segments of `segment` bytes each (the
/// last may be shorter), at most [`GSO_MESSAGES`] of them, in one `sendmmsg`. Returns the bytes
/// of the messages accepted: each message is atomic, and the call fails only when its first
/// message does (the ones after it were not tried). One message goes by [`send_segmented`].
pub fn send_segmented_batch(fd: BorrowedFd<'_>, buf: &[u8], segment: u16, per_message: usize) -> io::Result<usize> {
    let message = usize::from(segment).max(1) * per_message.max(1);
    if buf.len() <= message {
        return send_segmented(fd, buf, segment);
    }
    // One control message serves every header: the kernel only reads it.
    let mut control = [0u64; 4];
    // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid.
    let mut iov: [libc::iovec; GSO_MESSAGES] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; GSO_MESSAGES] = unsafe { std::mem::zeroed() };
    set_segment_size(&mut msgs[0].msg_hdr, &mut control, segment);
    let (control_ptr, control_len) = (msgs[0].msg_hdr.msg_control, msgs[0].msg_hdr.msg_controllen);
    let mut count = 0;
    for (i, chunk) in buf.chunks(message).take(GSO_MESSAGES).enumerate() {
        iov[i] = libc::iovec { iov_base: chunk.as_ptr() as *mut libc::c_void, iov_len: chunk.len() };
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = control_ptr;
        msgs[i].msg_hdr.msg_controllen = control_len;
        count = i + 1;
    }
    // SAFETY: the first `count` headers point at live iovecs (inside `buf`) and at the live
    // control buffer; the kernel only reads them.
    let n = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), count as libc::c_uint, 0) };
    let sent = check(n)? as usize;
    Ok(iov[..sent].iter().map(|v| v.iov_len).sum())
}

/// Points `msg` at `control` (u64s: aligned for cmsghdr) and writes in it the UDP_SEGMENT
/// message that has the kernel cut the datagram into `segment`-byte datagrams (GSO).
fn set_segment_size(msg: &mut libc::msghdr, control: &mut [u64; 4], segment: u16) {
    msg.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as _;
    // SAFETY: the control buffer (32 bytes) is larger than CMSG_SPACE(2) = 24, so the first
    // header and its 2-byte payload lie inside it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment);
    }
}

/// What the kernel said about one received (possibly coalesced) datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// Size of each coalesced datagram (GRO); equals `len` when not coalesced.
    pub stride: usize,
    /// Kernel receive time, ns since the Unix epoch (CLOCK_REALTIME), when stamped.
    pub kernel_ns: Option<u64>,
}

/// The most bytes of slots one receiving stream holds: [`BATCH`] slots while they fit (slots
/// up to 16 KiB: a netchar receiver's slot is its datagram plus 1 KiB), fewer for larger
/// ones. The pages of a slot stay resident once a datagram filled them, and 64 slots of
/// 64 KiB made a server receiving 128 streams of 65000 B datagrams hold 244 MB; 16 of them
/// per call cost nothing beside a 64 KiB copy each.
pub const RECV_BUFFER_BYTES: usize = 1 << 20;

/// Buffers for [`recv_many`], allocated once per receiving stream.
pub struct RecvBuffers {
    data: Vec<u8>,
    slot: usize,
    /// Slots per call: BATCH, or fewer where BATCH of `slot` would pass RECV_BUFFER_BYTES.
    slots: usize,
    control: Vec<[u64; 16]>,
}

impl RecvBuffers {
    /// Slots of `slot` bytes each (use [`GRO_BUFFER`] with GRO on): [`BATCH`] of them, or as
    /// many as fit in [`RECV_BUFFER_BYTES`] (at least one).
    pub fn new(slot: usize) -> Self {
        let slots = (RECV_BUFFER_BYTES / slot.max(1)).clamp(1, BATCH);
        Self { data: vec![0; slot * slots], slot, slots, control: vec![[0u64; 16]; slots] }
    }

    /// Datagrams one [`recv_many`] can take.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The bytes of slot `i` (valid for the length [`recv_many`] reported).
    #[inline]
    pub fn slot(&self, i: usize) -> &[u8] {
        &self.data[i * self.slot..(i + 1) * self.slot]
    }
}

/// Receives up to [`RecvBuffers::slots`] (at most [`BATCH`]) datagrams with one `recvmmsg`,
/// waiting (per the socket's receive timeout) for the first only (MSG_WAITFORONE). Fills
/// `meta[i]` for each slot received.
pub fn recv_many(fd: BorrowedFd<'_>, bufs: &mut RecvBuffers, meta: &mut [RecvMeta; BATCH]) -> io::Result<usize> {
    // SAFETY: plain old data, all-zero valid.
    let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    let (slot, slots) = (bufs.slot, bufs.slots);
    let data = bufs.data.as_mut_ptr();
    for i in 0..slots {
        // SAFETY: slot i lies inside `data` (slots·slot bytes long).
        iov[i] = libc::iovec { iov_base: unsafe { data.add(i * slot) }.cast(), iov_len: slot };
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_control = bufs.control[i].as_mut_ptr().cast();
        msgs[i].msg_hdr.msg_controllen = std::mem::size_of::<[u64; 16]>() as _;
    }
    // SAFETY: every header points at live, writable iovecs and control buffers of the sizes
    // given; a null timeout means "use the socket's".
    let n = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr(),
            slots as libc::c_uint,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    let n = check(n)? as usize;
    for i in 0..n {
        let hdr = &msgs[i].msg_hdr;
        let len = msgs[i].msg_len as usize;
        let mut m = RecvMeta { len, stride: len, kernel_ns: None };
        // SAFETY: `hdr` was filled by recvmmsg; the CMSG macros stay inside msg_control.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(hdr) };
        while !cmsg.is_null() {
            // SAFETY: non-null and inside the control buffer.
            let c = unsafe { &*cmsg };
            // SAFETY: each payload type is the one the kernel documents for that (level, type);
            // read_unaligned because control payloads carry no alignment promise.
            unsafe {
                match (c.cmsg_level, c.cmsg_type) {
                    (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                        let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                        m.kernel_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                    }
                    (libc::SOL_UDP, libc::UDP_GRO) => {
                        let size: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                        if size > 0 {
                            m.stride = size as usize;
                        }
                    }
                    _ => {}
                }
            }
            // SAFETY: as above.
            cmsg = unsafe { libc::CMSG_NXTHDR(hdr, cmsg) };
        }
        meta[i] = m;
    }
    Ok(n)
}

/// Receives one datagram with its kernel receive timestamp (SO_TIMESTAMPNS must be on).
/// Returns (bytes, kernel receive time in ns since the Unix epoch, if stamped).
pub fn recv_timestamped(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain old data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at the live, writable `buf` and `control` with their true sizes.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    let n = check(n as libc::c_int).map(|n| n as usize)?;
    let mut stamp = None;
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros stay inside msg_control.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: non-null and inside the control buffer; the payload of SCM_TIMESTAMPNS is a
        // timespec, read unaligned because control payloads promise no alignment.
        unsafe {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, stamp))
}

/// SO_MEMINFO in asm-generic/socket.h, which x86 and arm use (other architectures number it
/// differently; there the call fails its length check and /proc is read instead). The libc
/// crate does not export it.
const SO_MEMINFO: libc::c_int = 55;

/// The socket's count of datagrams dropped because its receive queue was full.
///
/// Read on demand (SO_MEMINFO, one getsockopt) rather than with every datagram: SO_RXQ_OVFL's
/// per-datagram control message cost about 5% of a receiving core at 850k datagrams/s. Falls
/// back to /proc/net/udp{,6} (the last column, matched by inode) on kernels without SO_MEMINFO.
pub fn socket_drops(fd: BorrowedFd<'_>) -> Option<u64> {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
    // SAFETY: `info` is a live buffer of `len` bytes; the kernel writes at most `len` bytes.
    let rc =
        unsafe { libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, SO_MEMINFO, info.as_mut_ptr().cast(), &mut len) };
    if rc == 0 && len as usize == std::mem::size_of_val(&info) {
        return Some(u64::from(info[libc::SK_MEMINFO_DROPS as usize]));
    }
    proc_socket_drops(fd)
}

fn proc_socket_drops(fd: BorrowedFd<'_>) -> Option<u64> {
    // SAFETY: stat is plain old data; fstat fills it for a valid descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live stat buffer and `fd` a valid descriptor.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    let inode = st.st_ino.to_string();
    ["/proc/net/udp", "/proc/net/udp6"].iter().find_map(|table| {
        let text = std::fs::read_to_string(table).ok()?;
        text.lines().skip(1).find_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
            (cols.get(9) == Some(&inode.as_str())).then(|| cols.last()?.parse().ok()).flatten()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn batches_gso_and_metadata_round_trip_on_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        enable_rx_timestamps(rx.as_fd()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let buf: Vec<u8> = (0..10 * 100).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_many(tx.as_fd(), &buf, 100, 10).unwrap(), 10);
        let gso = gso_supported(tx.as_fd());
        if gso {
            assert_eq!(send_segmented(tx.as_fd(), &buf, 100).unwrap(), 1000);
        }
        let mut bufs = RecvBuffers::new(2048);
        let mut meta = [RecvMeta::default(); BATCH];
        let mut got = Vec::new();
        while got.len() < if gso { 20 } else { 10 } {
            let n = recv_many(rx.as_fd(), &mut bufs, &mut meta).unwrap();
            for (i, m) in meta.iter().enumerate().take(n) {
                assert_eq!(m.len, 100);
                assert!(m.kernel_ns.is_some());
                got.push(bufs.slot(i)[0]);
            }
        }
        assert_eq!(&got[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(socket_drops(rx.as_fd()), Some(0));
    }

    /// Slots of 64 KiB (GRO, or datagrams near the largest) come 16 to a call, within
    /// RECV_BUFFER_BYTES; smaller ones BATCH to a call. Every datagram still arrives, in order.
    #[test]
    fn large_slots_take_fewer_datagrams_a_call_and_lose_none() {
        assert_eq!(RecvBuffers::new(2496).slots(), BATCH);
        assert_eq!(RecvBuffers::new(GRO_BUFFER + 1).slots(), 16);
        assert_eq!(RecvBuffers::new(RECV_BUFFER_BYTES * 2).slots(), 1);
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let buf: Vec<u8> = (0..20 * 1000).map(|i| (i / 1000) as u8).collect();
        assert_eq!(send_many(tx.as_fd(), &buf, 1000, 20).unwrap(), 20);
        let mut bufs = RecvBuffers::new(65_536);
        let mut meta = [RecvMeta::default(); BATCH];
        let mut calls = Vec::new();
        let mut got = Vec::new();
        while got.len() < 20 {
            let n = recv_many(rx.as_fd(), &mut bufs, &mut meta).unwrap();
            calls.push(n);
            for (i, m) in meta.iter().enumerate().take(n) {
                assert_eq!(m.len, 1000);
                got.push(bufs.slot(i)[0]);
            }
        }
        assert_eq!(calls, [16, 4], "all 20 were queued before the first call");
        assert_eq!(got, (0..20).collect::<Vec<u8>>());
    }

    /// Several GSO super-datagrams in one call: every datagram arrives, in order, the last
    /// message may be short, and a call takes at most GSO_MESSAGES messages.
    #[test]
    fn segmented_batches_send_several_messages_a_call() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        if !gso_supported(tx.as_fd()) {
            return crate::fdtable::require::unavailable(
                "segmented_batches_send_several_messages_a_call",
                "no UDP GSO (UDP_SEGMENT, Linux 4.18) on this kernel",
            );
        }
        // 30 datagrams of 100 B as messages of 4: seven full ones and one of 2.
        let buf: Vec<u8> = (0..30 * 100).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_segmented_batch(tx.as_fd(), &buf, 100, 4).unwrap(), 3000);
        // 40 datagrams would be ten messages: the call takes eight, 32 datagrams.
        let more: Vec<u8> = (0..40 * 100).map(|i| 100 + (i / 100) as u8).collect();
        assert_eq!(send_segmented_batch(tx.as_fd(), &more, 100, 4).unwrap(), 3200);
        // One message's worth goes as one GSO send.
        assert_eq!(send_segmented_batch(tx.as_fd(), &buf[..400], 100, 4).unwrap(), 400);
        let mut bufs = RecvBuffers::new(2048);
        let mut meta = [RecvMeta::default(); BATCH];
        let mut got = Vec::new();
        while got.len() < 66 {
            let n = recv_many(rx.as_fd(), &mut bufs, &mut meta).unwrap();
            for (i, m) in meta.iter().enumerate().take(n) {
                assert_eq!(m.len, 100);
                got.push(bufs.slot(i)[0]);
            }
        }
        let expected: Vec<u8> = (0..30).chain(100..132).chain(0..4).collect();
        assert_eq!(got, expected);
        assert_eq!(socket_drops(rx.as_fd()), Some(0));
    }

    #[test]
    fn refusals_are_counted_and_broken_sockets_are_fatal() {
        let class = |errno| classify_send_error(&io::Error::from_raw_os_error(errno), false);
        // A local firewall's EPERM used to end `udp -R`'s sender on the server.
        // EMSGSIZE: a datagram above the path MTU of a don't-fragment socket (--df), counted.
        for errno in [
            libc::EPERM,
            libc::ENOBUFS,
            libc::EAGAIN,
            libc::ECONNREFUSED,
            libc::EHOSTUNREACH,
            libc::EACCES,
            libc::EMSGSIZE,
        ] {
            assert_eq!(class(errno), SendFailure::Refused, "errno {errno}");
        }
        for errno in [libc::EBADF, libc::ENOTSOCK, libc::EINVAL, libc::EIO] {
            assert_eq!(class(errno), SendFailure::Fatal, "errno {errno}");
        }
        let segmented = |errno| classify_send_error(&io::Error::from_raw_os_error(errno), true);
        assert_eq!(segmented(libc::EIO), SendFailure::Unsegmentable);
        assert_eq!(segmented(libc::EINVAL), SendFailure::Unsegmentable);
        assert_eq!(segmented(libc::EPERM), SendFailure::Refused);
        assert_eq!(classify_send_error(&io::ErrorKind::WouldBlock.into(), false), SendFailure::Refused);
    }

    #[test]
    fn an_icmp_error_refuses_one_send_and_the_socket_sends_on() {
        // A datagram to a closed port brings back ICMP port unreachable; the connected socket
        // reports it once, as the next send's ECONNREFUSED, and then sends again.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = closed.local_addr().unwrap();
        drop(closed);
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(target).unwrap();
        let buf = [0u8; 100];
        assert_eq!(send_many(tx.as_fd(), &buf, 100, 1).unwrap(), 1);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let err = send_many(tx.as_fd(), &buf, 100, 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ECONNREFUSED), "{err}");
        assert_eq!(classify_send_error(&err, false), SendFailure::Refused);
        assert_eq!(send_many(tx.as_fd(), &buf, 100, 1).unwrap(), 1, "the socket still sends");
    }

    #[test]
    fn drops_are_counted_when_the_receive_queue_overflows() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        setsockopt_int(rx.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4096).unwrap();
        // Nothing reads: past the (doubled, minimum) buffer every datagram is dropped.
        for _ in 0..200 {
            tx.send(&[0u8; 1000]).unwrap();
        }
        let drops = socket_drops(rx.as_fd()).unwrap();
        assert!(drops > 100, "{drops} drops of 200 datagrams into a 4 KiB buffer");
        assert_eq!(proc_socket_drops(rx.as_fd()), Some(drops), "SO_MEMINFO and /proc/net/udp agree");
    }
}
