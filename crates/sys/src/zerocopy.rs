//! Zero-copy TCP sends of one constant payload: `MSG_ZEROCOPY` with its completions reaped
//! from the socket's error queue, or, where the kernel would copy that data anyway, the
//! payload's pages spliced into the socket by reference.
//!
//! Kernel contract (Documentation/networking/msg_zerocopy.rst): each zero-copy `send` call gets
//! a 32-bit id, counting from 0; the kernel reports ranges of finished ids on `MSG_ERRQUEUE`.
//! Until its id completes a buffer must not change. [`ZeroCopySender`] therefore owns its
//! payload: one anonymous mapping, written once at creation and never again, and released only
//! after every send is confirmed (or leaked when that cannot be known). Unreaped completions
//! use option memory, and sends then fail with `ENOBUFS`, so they are reaped as they come.
//!
//! When the kernel has to copy after all it flags the completion `SO_EE_CODE_ZEROCOPY_COPIED`.
//! That is the rule on loopback and veth (the receive path copies every page of a zero-copy
//! skb out before the socket may queue it, `skb_orphan_frags_rx`), and whenever a packet tap
//! is open. Such a send costs more than a plain copying send: pinning, the completion, and a
//! deferred copy into single pages that the receiver then reads page by page.
//!
//! Pages handed to the socket by reference through a pipe (`vmsplice` of the payload, then
//! `splice` to the socket) carry no zero-copy mark, so loopback does not copy them: the reader
//! copies straight out of the payload's pages, one copy in all. There is no completion for
//! such pages, so this is sound only because the payload is never written and the kernel holds
//! its own page references until it is done with them. With [`OnCopy::FallBack`] the sender
//! watches the first completions and, if the kernel copied most of them, moves to splicing,
//! or to plain copying sends where splicing fails. The counters say which sends were which.
//!
//! Measured on a 2-vCPU VM, Linux 6.18, 128 KiB blocks to a `read` loop on 127.0.0.1, 3 s,
//! medians of 5 in one window (Gbit/s): iperf3 29.8, plain sends 29.4, `MSG_ZEROCOPY` from a
//! heap buffer 24.2 (every completion copied), with this fallback 57.1.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
/// Reap once this many sends are unconfirmed; keeps option memory (optmem_max) in bounds.
const MAX_OUTSTANDING: u64 = 128;
/// Also reap without waiting every this many sends, so the queue never backs up to the cap.
const REAP_EVERY: u64 = 8;
/// [`OnCopy::FallBack`] decides once this many zero-copy sends are confirmed (2 MiB of 128 KiB
/// blocks: a few milliseconds at the rates where the choice matters).
const PROBE_COMPLETIONS: u64 = 16;

/// What a [`ZeroCopySender`] does when the kernel reports that it copied the data anyway.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum OnCopy {
    /// Keep sending with `MSG_ZEROCOPY` (to measure the zero-copy path itself).
    KeepZeroCopy,
    /// If most of the first completions were copied, splice the payload's pages instead
    /// ([`SendMethod::Splice`]), or send plain copies where splicing fails.
    #[default]
    FallBack,
}

/// How a [`ZeroCopySender`] is sending now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum SendMethod {
    /// `send(MSG_ZEROCOPY)`, completions from the error queue.
    #[default]
    ZeroCopy,
    /// `vmsplice` of the payload into a pipe, `splice` from the pipe to the socket.
    Splice,
    /// Plain copying `send`.
    Copy,
}

/// Counters of one zero-copy sender.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ZeroCopyStats {
    /// `MSG_ZEROCOPY` send calls that sent something.
    pub sends: u64,
    /// Of those, confirmed complete by the kernel.
    pub completed: u64,
    /// Of the completed ones, those the kernel had to copy after all.
    pub copied: u64,
    /// `splice` calls (pipe to socket) that sent something, after falling back.
    pub splice_sends: u64,
    /// Plain copying send calls, after falling back where splicing failed.
    pub copy_sends: u64,
    /// The method in use at the end (the last one fallen back to).
    pub method: SendMethod,
}

/// Transparent huge page size on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// A private anonymous mapping holding the payload, aligned to and a multiple of
/// [`HUGE_PAGE`] and advised `MADV_HUGEPAGE`; read-only after creation.
///
/// A huge page makes each send's page references cheaper (pinning or `vmsplice` takes one
/// reference per huge-page mapping instead of one per 4 KiB page). Spliced sends on the VM
/// above, medians of 6 in one window: 57.8 vs 43.3 Gbit/s pinned 0/1, 54.2 vs 49.3 unpinned.
/// It costs 2 MiB per sending stream where THP is enabled; where it is not, the kernel backs
/// the mapping with small pages and only the touched ones (the payload) use memory.
#[derive(Debug)]
struct PageBuffer {
    ptr: std::ptr::NonNull<u8>,
    /// Payload bytes.
    len: usize,
    /// Mapped bytes from `ptr`.
    map_len: usize,
}

// SAFETY: the mapping is owned by this value alone and never written after `new` returns, so
// sharing or moving it across threads cannot race.
unsafe impl Send for PageBuffer {}
// SAFETY: as above: only shared reads after construction.
unsafe impl Sync for PageBuffer {}

impl PageBuffer {
    /// Maps room for `payload` and copies it in.
    fn new(payload: &[u8]) -> io::Result<Self> {
        let map_len = payload.len().max(1).next_multiple_of(HUGE_PAGE);
        // One huge page more than needed, so an aligned start lies inside.
        let reserve = map_len + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserve,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let raw = raw.cast::<u8>();
        let head = (raw as usize).next_multiple_of(HUGE_PAGE) - raw as usize;
        let tail = reserve - head - map_len;
        // SAFETY: `head + map_len + tail == reserve`, so both offsets stay inside the mapping.
        let (start, end) = unsafe { (raw.add(head), raw.add(head + map_len)) };
        // SAFETY: the unmapped head and tail are the unused, page-aligned ends of the mapping
        // made above (mmap returns page-aligned memory and HUGE_PAGE is a page multiple); no
        // reference into them exists.
        unsafe {
            if head > 0 {
                libc::munmap(raw.cast(), head);
            }
            if tail > 0 {
                libc::munmap(end.cast(), tail);
            }
        }
        // SAFETY: advice on our own mapping; failure (no THP) only means small pages.
        let _ = unsafe { libc::madvise(start.cast(), map_len, libc::MADV_HUGEPAGE) };
        let ptr = std::ptr::NonNull::new(start).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // SAFETY: the mapping is `map_len >= payload.len()` writable bytes, fresh, so it
        // cannot overlap `payload`.
        unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), ptr.as_ptr(), payload.len()) };
        Ok(Self { ptr, len: payload.len(), map_len })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` maps at least `len` initialised bytes for as long as `self` lives and
        // they are never written after `new`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for PageBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` kept; no slice of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

/// Sends one constant payload with `MSG_ZEROCOPY` on one socket (or, after falling back, by
/// splicing its pages or by plain copies).
#[derive(Debug)]
pub struct ZeroCopySender {
    /// `None` only transiently in `Drop`.
    buf: Option<PageBuffer>,
    stats: ZeroCopyStats,
    on_copy: OnCopy,
    /// [`SendMethod::Splice`]: the pipe and how many payload bytes wait in it.
    pipe: Option<SplicePipe>,
}

/// The pipe a splicing sender moves page references through.
#[derive(Debug)]
struct SplicePipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    /// Bytes of the payload still in the pipe.
    queued: usize,
}

impl SplicePipe {
    /// A pipe big enough for one block where the kernel allows (`F_SETPIPE_SZ`; an
    /// unprivileged process may go up to `fs.pipe-max-size`, 1 MiB by default).
    fn new(block: usize) -> io::Result<Self> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a live array of two ints, as pipe2 requires.
        check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
        // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let want = block.clamp(1 << 16, 1 << 20) as libc::c_int;
        // SAFETY: fcntl on a descriptor we own, with an integer argument.
        let _ = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
        // SAFETY: as above; F_GETPIPE_SZ takes no argument.
        let capacity = check(unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) })? as usize;
        Ok(Self { read, write, capacity, queued: 0 })
    }
}

impl ZeroCopySender {
    /// Enables SO_ZEROCOPY on the socket and takes a page-aligned copy of `payload`, the bytes
    /// every send sends from; fails where the kernel has no zero-copy send.
    pub fn new(fd: BorrowedFd<'_>, payload: &[u8], on_copy: OnCopy) -> io::Result<Self> {
        crate::tcp::set_zerocopy(fd)?;
        Ok(Self { buf: Some(PageBuffer::new(payload)?), stats: ZeroCopyStats::default(), on_copy, pipe: None })
    }

    /// The counters so far.
    pub fn stats(&self) -> ZeroCopyStats {
        self.stats
    }

    /// Sends with `method` from now on (a caller that chooses by measurement, with
    /// [`OnCopy::KeepZeroCopy`] so the sender does not switch by itself). Payload bytes still
    /// in the splice pipe are dropped with it: they were never counted as sent.
    pub fn set_method(&mut self, method: SendMethod) {
        if method != SendMethod::Splice {
            self.pipe = None;
        }
        self.stats.method = method;
    }

    /// Sends up to `len` bytes of the payload (`len` is capped at its length); returns the
    /// bytes the socket took. Errors are the socket's: `WouldBlock`/`TimedOut` when a send
    /// timeout expired, to be retried.
    pub fn send(&mut self, fd: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        let pending = self.stats.sends - self.stats.completed;
        if pending >= MAX_OUTSTANDING {
            self.reap(fd, Some(Duration::from_millis(100)))?;
        } else if pending > 0 && self.stats.sends.is_multiple_of(REAP_EVERY) {
            self.reap(fd, None)?;
        }
        match self.stats.method {
            SendMethod::ZeroCopy => self.send_flags(fd, len, libc::MSG_ZEROCOPY),
            SendMethod::Copy => self.send_flags(fd, len, 0),
            SendMethod::Splice => match self.splice(fd, len) {
                Err(e) if self.stats.splice_sends == 0 && !is_retry(&e) => {
                    // Splicing does not work here (no vmsplice, or the socket refuses spliced
                    // pages): plain copies from now on.
                    self.pipe = None;
                    self.stats.method = SendMethod::Copy;
                    self.send_flags(fd, len, 0)
                }
                r => r,
            },
        }
    }

    /// One `send` call of the payload's first `len` bytes with `flags`.
    fn send_flags(&mut self, fd: BorrowedFd<'_>, len: usize, flags: libc::c_int) -> io::Result<usize> {
        loop {
            let buf = self.payload();
            let len = len.min(buf.len());
            // SAFETY: `buf` is live for the call. For MSG_ZEROCOPY the kernel keeps reading the
            // pages after the call; they belong to `self.buf`, which is never written and is
            // not unmapped before every send is confirmed (see `Drop`).
            let n = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), len, flags | libc::MSG_NOSIGNAL) };
            if n >= 0 {
                if n > 0 {
                    if flags & libc::MSG_ZEROCOPY != 0 {
                        self.stats.sends += 1;
                    } else {
                        self.stats.copy_sends += 1;
                    }
                }
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOBUFS) if flags & libc::MSG_ZEROCOPY != 0 => {
                    self.reap(fd, Some(Duration::from_millis(100)))?;
                }
                Some(libc::EINTR) => {}
                _ => return Err(err),
            }
        }
    }

    /// Refills the pipe with page references to the payload when it is empty, then moves up
    /// to `len` bytes of it to the socket with one `splice`.
    fn splice(&mut self, fd: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
        if self.pipe.is_none() {
            self.pipe = Some(SplicePipe::new(self.payload().len())?);
        }
        let buf = self.buf.as_ref().map_or(&[][..], PageBuffer::as_slice);
        let pipe = self.pipe.as_mut().expect("set above");
        if pipe.queued == 0 {
            let iov =
                libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len().min(pipe.capacity) };
            // SAFETY: `iov` describes live bytes of the payload mapping. Without SPLICE_F_GIFT
            // the pipe takes references to those pages and reads them later: sound because the
            // mapping is never written after creation, and unmapping it does not free pages
            // the kernel still holds references to.
            let n = unsafe { libc::vmsplice(pipe.write.as_raw_fd(), &iov, 1, 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            pipe.queued = n as usize;
        }
        let want = len.min(pipe.queued);
        loop {
            // SAFETY: splice between two descriptors that are open for the call (the pipe's
            // read end and the caller's socket); null offsets, as pipes and sockets require.
            let n = unsafe {
                libc::splice(
                    pipe.read.as_raw_fd(),
                    std::ptr::null_mut(),
                    fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    want,
                    libc::SPLICE_F_MOVE,
                )
            };
            if n >= 0 {
                let n = n as usize;
                pipe.queued -= n;
                if n > 0 {
                    self.stats.splice_sends += 1;
                }
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
    }

    /// Waits until every zero-copy send is confirmed, at most `limit`. Returns the final
    /// counters. After this the payload may be released.
    pub fn finish(&mut self, fd: BorrowedFd<'_>, limit: Duration) -> io::Result<ZeroCopyStats> {
        let deadline = Instant::now() + limit;
        while self.stats.completed < self.stats.sends {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "zero-copy completions did not arrive"));
            }
            self.reap(fd, Some(left.min(Duration::from_millis(100))))?;
        }
        Ok(self.stats)
    }

    fn payload(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], PageBuffer::as_slice)
    }

    /// Reads every completion queued now; with `wait`, first waits up to that long for one.
    fn reap(&mut self, fd: BorrowedFd<'_>, wait: Option<Duration>) -> io::Result<()> {
        if let Some(wait) = wait {
            let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: 0, revents: 0 };
            // SAFETY: `pfd` is one live pollfd, matching the count of 1.
            check(unsafe { libc::poll(&mut pfd, 1, wait.as_millis().max(1) as libc::c_int) })?;
        }
        while let Some((lo, hi, code)) = read_completion(fd)? {
            let count = u64::from(hi.wrapping_sub(lo)) + 1;
            self.stats.completed += count;
            if code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                self.stats.copied += count;
            }
        }
        self.decide();
        Ok(())
    }

    /// [`OnCopy::FallBack`]: once enough sends are confirmed, stop zero-copy sends if the
    /// kernel copied at least three quarters of them.
    fn decide(&mut self) {
        let s = &mut self.stats;
        if self.on_copy == OnCopy::FallBack
            && s.method == SendMethod::ZeroCopy
            && s.completed >= PROBE_COMPLETIONS
            && s.copied * 4 >= s.completed * 3
        {
            s.method = SendMethod::Splice;
        }
    }
}

impl Drop for ZeroCopySender {
    fn drop(&mut self) {
        // Sends not confirmed may still be read by the kernel: keep their pages mapped and
        // unchanged (a bounded leak, only after an error or a timeout in `finish`).
        if self.stats.completed < self.stats.sends {
            std::mem::forget(self.buf.take());
        }
    }
}

/// One send method as measured by a short probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// The method.
    pub method: SendMethod,
    /// Bytes the socket took over the probe's time, bits per second.
    pub bits_per_second: f64,
    /// `MSG_ZEROCOPY`: share of the probe's confirmed sends the kernel copied anyway (None:
    /// none confirmed yet, which the chooser takes as copied).
    pub copied_share: Option<f64>,
}

/// Rates within this share of the fastest count as equal: a probe of tens of milliseconds
/// cannot tell them apart, and the method that copies less then saves CPU at the same rate.
pub const RATE_TIE: f64 = 0.03;

/// Chooses the send method from probes: the fastest measured, except that among those within
/// [`RATE_TIE`] of it the one that copies least wins — `MSG_ZEROCOPY` the kernel did not copy
/// (a real NIC), then splicing, then plain sends, then `MSG_ZEROCOPY` the kernel copied.
/// None when nothing was measured.
pub fn choose_method(tried: &[Measured]) -> Option<SendMethod> {
    let fastest = tried.iter().map(|m| m.bits_per_second).fold(f64::NAN, f64::max);
    if fastest.is_nan() {
        return None;
    }
    let copies = |m: &Measured| match m.method {
        SendMethod::ZeroCopy if m.copied_share.is_some_and(|c| c < 0.25) => 0,
        SendMethod::Splice => 1,
        SendMethod::Copy => 2,
        SendMethod::ZeroCopy => 3,
    };
    tried
        .iter()
        .filter(|m| m.bits_per_second >= fastest * (1.0 - RATE_TIE))
        .min_by(|a, b| copies(a).cmp(&copies(b)).then(b.bits_per_second.total_cmp(&a.bits_per_second)))
        .map(|m| m.method)
}

fn is_retry(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// One zero-copy completion range from the error queue, or None when the queue is empty.
fn read_completion(fd: BorrowedFd<'_>) -> io::Result<Option<(u32, u32, u8)>> {
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain old data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at the live `control` buffer with its true size and no data iovecs.
    let ret = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if ret < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(err),
        };
    }
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR only walk inside msg_control.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is non-null and inside the control buffer (checked by the macros).
        let hdr = unsafe { &*cmsg };
        let is_err = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
            || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
        if is_err {
            // SAFETY: for IP(V6)_RECVERR the data is a sock_extended_err; read_unaligned because
            // the control buffer gives no alignment guarantee for the payload type.
            let ee: libc::sock_extended_err = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                return Ok(Some((ee.ee_info, ee.ee_data, ee.ee_code)));
            }
        }
        // SAFETY: as above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    /// A connected pair and a reader thread that returns every byte it read.
    fn pair() -> (TcpStream, std::thread::JoinHandle<Vec<u8>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            s.read_to_end(&mut all).unwrap();
            all
        });
        (c, reader)
    }

    fn payload() -> Vec<u8> {
        (0..64 * 1024).map(|i| b"0123456789"[i % 10]).collect()
    }

    fn check_stream(got: &[u8], payload: &[u8], sizes: &[usize]) {
        let mut at = 0;
        for &n in sizes {
            assert_eq!(&got[at..at + n], &payload[..n], "bytes {at}..{} differ", at + n);
            at += n;
        }
        assert_eq!(at, got.len());
    }

    fn m(method: SendMethod, gbps: f64, copied: Option<f64>) -> Measured {
        Measured { method, bits_per_second: gbps * 1e9, copied_share: copied }
    }

    #[test]
    fn the_fastest_method_is_chosen() {
        // Loopback on the machine of issue 13: splicing slower than plain sends.
        let tried = [
            m(SendMethod::Copy, 16.0, None),
            m(SendMethod::ZeroCopy, 11.0, Some(1.0)),
            m(SendMethod::Splice, 10.0, None),
        ];
        assert_eq!(choose_method(&tried), Some(SendMethod::Copy));
        // The machine where splicing pays.
        let tried = [
            m(SendMethod::Copy, 29.0, None),
            m(SendMethod::ZeroCopy, 24.0, Some(1.0)),
            m(SendMethod::Splice, 57.0, None),
        ];
        assert_eq!(choose_method(&tried), Some(SendMethod::Splice));
        // Copied MSG_ZEROCOPY is still taken when it really is the fastest.
        let tried = [m(SendMethod::Copy, 10.0, None), m(SendMethod::ZeroCopy, 12.0, Some(1.0))];
        assert_eq!(choose_method(&tried), Some(SendMethod::ZeroCopy));
        assert_eq!(choose_method(&[]), None);
    }

    #[test]
    fn a_tie_goes_to_the_method_that_copies_least() {
        // A NIC at line rate: every method runs at 9.4 Gbit/s; MSG_ZEROCOPY was not copied.
        let tried = [
            m(SendMethod::Copy, 9.41, None),
            m(SendMethod::ZeroCopy, 9.39, Some(0.0)),
            m(SendMethod::Splice, 9.40, None),
        ];
        assert_eq!(choose_method(&tried), Some(SendMethod::ZeroCopy));
        // Copied MSG_ZEROCOPY loses a tie to plain sends.
        let tried = [m(SendMethod::Copy, 9.40, None), m(SendMethod::ZeroCopy, 9.41, Some(0.9))];
        assert_eq!(choose_method(&tried), Some(SendMethod::Copy));
        // Outside the tie band the rate decides, whatever copies.
        let tried = [m(SendMethod::Copy, 10.0, None), m(SendMethod::ZeroCopy, 9.0, Some(0.0))];
        assert_eq!(choose_method(&tried), Some(SendMethod::Copy));
    }

    #[test]
    fn the_choice_is_never_slower_than_the_tie_band() {
        let methods = [SendMethod::Copy, SendMethod::ZeroCopy, SendMethod::Splice];
        for seed in 0u64..500 {
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mut next = || {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) as f64 / (1u64 << 31) as f64
            };
            let tried: Vec<Measured> = methods
                .iter()
                .map(|&meth| m(meth, 1.0 + 40.0 * next(), (meth == SendMethod::ZeroCopy).then(&mut next)))
                .collect();
            let chosen = choose_method(&tried).unwrap();
            let rate = tried.iter().find(|t| t.method == chosen).unwrap().bits_per_second;
            let fastest = tried.iter().map(|t| t.bits_per_second).fold(0.0, f64::max);
            assert!(rate >= fastest * (1.0 - RATE_TIE), "{tried:?} chose {chosen:?}");
        }
    }

    #[test]
    fn every_send_is_confirmed() {
        let (c, reader) = pair();
        let data = payload();
        let mut zc = ZeroCopySender::new(c.as_fd(), &data, OnCopy::KeepZeroCopy).unwrap();
        let mut sizes = Vec::new();
        for _ in 0..500 {
            sizes.push(zc.send(c.as_fd(), data.len()).unwrap());
        }
        let stats = zc.finish(c.as_fd(), Duration::from_secs(5)).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        check_stream(&reader.join().unwrap(), &data, &sizes);
        assert_eq!(stats.completed, stats.sends);
        assert!(stats.sends > 0);
        assert_eq!(stats.method, SendMethod::ZeroCopy);
        assert_eq!(stats.splice_sends + stats.copy_sends, 0);
    }

    /// The bytes a spliced stream carries: whole payload prefixes of the pipe's capacity, cut
    /// into the sizes each send returned. Rebuild them like the sender does.
    fn check_spliced(got: &[u8], payload: &[u8], sizes: &[usize], capacity: usize) {
        let refill = payload.len().min(capacity);
        let (mut at, mut in_pipe) = (0, 0usize);
        for &n in sizes {
            if in_pipe == 0 {
                in_pipe = refill;
            }
            let from = refill - in_pipe;
            assert_eq!(&got[at..at + n], &payload[from..from + n], "bytes {at}..{} differ", at + n);
            at += n;
            in_pipe -= n;
        }
        assert_eq!(at, got.len());
    }

    #[test]
    fn loopback_copies_make_it_splice_and_the_stream_stays_whole() {
        let (c, reader) = pair();
        let data = payload();
        let mut zc = ZeroCopySender::new(c.as_fd(), &data, OnCopy::FallBack).unwrap();
        let (mut zc_sizes, mut spliced) = (Vec::new(), Vec::new());
        for i in 0..500 {
            // Short sends too, as at the end of a byte budget.
            let len = if i % 7 == 0 { 1000 } else { data.len() };
            let before = zc.stats().sends;
            let n = zc.send(c.as_fd(), len).unwrap();
            assert!(n > 0);
            if zc.stats().sends > before {
                zc_sizes.push(n);
            } else {
                spliced.push(n);
            }
        }
        let stats = zc.finish(c.as_fd(), Duration::from_secs(5)).unwrap();
        let capacity = zc.pipe.as_ref().map_or(0, |p| p.capacity);
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let got = reader.join().unwrap();
        let zc_bytes: usize = zc_sizes.iter().sum();
        check_stream(&got[..zc_bytes], &data, &zc_sizes);
        assert_eq!(stats.completed, stats.sends);
        // Loopback always copies, so the sender must have switched after the probe.
        assert!(stats.copied >= PROBE_COMPLETIONS, "{stats:?}");
        assert_eq!(stats.method, SendMethod::Splice, "{stats:?}");
        assert_eq!(stats.splice_sends as usize, spliced.len());
        check_spliced(&got[zc_bytes..], &data, &spliced, capacity);
    }

    #[test]
    fn sends_never_exceed_the_payload() {
        let (c, reader) = pair();
        let data = payload();
        let mut zc = ZeroCopySender::new(c.as_fd(), &data[..100], OnCopy::KeepZeroCopy).unwrap();
        let n = zc.send(c.as_fd(), 1 << 20).unwrap();
        zc.finish(c.as_fd(), Duration::from_secs(5)).unwrap();
        drop(zc);
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(n <= 100);
        check_stream(&reader.join().unwrap(), &data, &[n]);
    }

    #[test]
    fn splicing_a_short_payload_and_dropping_it_early_keeps_the_bytes() {
        let (c, reader) = pair();
        let data = payload();
        let mut zc = ZeroCopySender::new(c.as_fd(), &data[..5000], OnCopy::FallBack).unwrap();
        zc.stats.method = SendMethod::Splice;
        let sizes: Vec<usize> = (0..50).map(|_| zc.send(c.as_fd(), 3000).unwrap()).collect();
        let capacity = zc.pipe.as_ref().map_or(0, |p| p.capacity);
        // The pages may still be in flight: unmapping them must not change what arrives.
        drop(zc);
        c.shutdown(std::net::Shutdown::Write).unwrap();
        check_spliced(&reader.join().unwrap(), &data[..5000], &sizes, capacity);
    }
}
