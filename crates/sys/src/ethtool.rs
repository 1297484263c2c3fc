//! An interface's driver, through the `SIOCETHTOOL` ioctl (linux/ethtool.h): its statistics
//! (`ethtool -S`: `ETHTOOL_GSSET_INFO`, `GSTRINGS`, `GSTATS`), driver and firmware (`-i`,
//! `GDRVINFO`), offload features (`-k`, `GFEATURES`) and interrupt coalescing (`-c`,
//! `GCOALESCE`); and an interface's index from its name and back (`SIOCGIFINDEX`,
//! `SIOCGIFNAME`).
//!
//! Every request goes through a datagram socket made by [`Ethtool::open`], so it is answered
//! by the network namespace that socket was made in. None of these requests needs a
//! privilege. A driver without an operation answers EOPNOTSUPP (loopback has no statistics and
//! no driver information; veth has no coalescing), returned as the `io::Error` it is.

use crate::check;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;

/// String set of the driver's statistics (`enum ethtool_stringset`).
const ETH_SS_STATS: u32 = 1;
/// String set of the netdev features.
const ETH_SS_FEATURES: u32 = 4;
/// Bytes of one name in a string set (ETH_GSTRING_LEN).
const ETH_GSTRING_LEN: usize = 32;

/// `struct ethtool_drvinfo`: cmd, five 32-byte strings, 12 reserved bytes, five u32.
const DRVINFO_LEN: usize = 4 + 5 * 32 + 12 + 5 * 4;
/// `struct ethtool_coalesce`: cmd and 22 u32.
const COALESCE_LEN: usize = 4 + COALESCE_NAMES.len() * 4;

/// The fields of `struct ethtool_coalesce` after `cmd`, in order, by `ethtool -C`'s names.
pub const COALESCE_NAMES: [&str; 22] = [
    "rx-usecs",
    "rx-frames",
    "rx-usecs-irq",
    "rx-frames-irq",
    "tx-usecs",
    "tx-frames",
    "tx-usecs-irq",
    "tx-frames-irq",
    "stats-block-usecs",
    "adaptive-rx",
    "adaptive-tx",
    "pkt-rate-low",
    "rx-usecs-low",
    "rx-frames-low",
    "tx-usecs-low",
    "tx-frames-low",
    "pkt-rate-high",
    "rx-usecs-high",
    "rx-frames-high",
    "tx-usecs-high",
    "tx-frames-high",
    "sample-interval",
];

/// What `ETHTOOL_GDRVINFO` tells of an interface; empty strings where the driver gives none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverInfo {
    /// Driver name (`veth`, `ixgbe`).
    pub driver: String,
    /// Driver version.
    pub version: String,
    /// Firmware version.
    pub firmware: String,
    /// Bus address (`0000:03:00.0`).
    pub bus_info: String,
    /// How many statistics `ETHTOOL_GSTATS` returns.
    pub n_stats: u32,
}

/// One netdev feature (`ethtool -k`), by the kernel's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// The kernel's name (`rx-gro`, `tx-tcp-segmentation`).
    pub name: String,
    /// The device can switch it (ethtool shows `[fixed]` where not).
    pub available: bool,
    /// It is on.
    pub active: bool,
}

/// A socket to send ethtool and interface ioctls through.
#[derive(Debug)]
pub struct Ethtool {
    fd: OwnedFd,
}

impl Ethtool {
    /// A datagram socket in the calling thread's network namespace (IPv4, or Unix where the
    /// kernel has no IPv4).
    pub fn open() -> io::Result<Self> {
        let socket = |domain| {
            // SAFETY: socket takes no pointers; a non-negative return is a new descriptor
            // that nothing else owns.
            check(unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
                // SAFETY: as above: the descriptor is fresh and owned here alone.
                .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        };
        let fd = socket(libc::AF_INET).or_else(|_| socket(libc::AF_UNIX))?;
        Ok(Self { fd })
    }

    /// Sends `SIOCETHTOOL` for `iface` with `data` as its argument.
    ///
    /// # Safety
    /// `data` must be valid for reads and writes of as many bytes as the command in its first
    /// four bytes reads and writes.
    unsafe fn ethtool(&self, iface: &str, data: *mut u8) -> io::Result<()> {
        let mut ifr = ifreq(iface)?;
        ifr.ifr_ifru.ifru_data = data.cast();
        // SAFETY: `ifr` is a live ifreq naming the interface; what the command does with the
        // memory `data` points to is the caller's promise.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCETHTOOL as _, &mut ifr) }).map(|_| ())
    }

    /// Driver, version, firmware and bus of `iface` (`ethtool -i`).
    pub fn driver_info(&self, iface: &str) -> io::Result<DriverInfo> {
        let mut buf = [0u8; DRVINFO_LEN];
        buf[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
        // SAFETY: GDRVINFO reads and writes one struct ethtool_drvinfo, DRVINFO_LEN bytes.
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        let text = |at: usize| c_string(&buf[at..at + 32]);
        Ok(DriverInfo {
            driver: text(4),
            version: text(36),
            firmware: text(68),
            bus_info: text(100),
            n_stats: read_u32(&buf, 4 + 5 * 32 + 12 + 4),
        })
    }

    /// How many strings string set `set` of `iface` has (`ETHTOOL_GSSET_INFO`).
    fn string_set_len(&self, iface: &str, set: u32) -> io::Result<usize> {
        // struct ethtool_sset_info: cmd, reserved, u64 sset_mask, then one u32 per set asked.
        let mut buf = [0u8; 24];
        buf[..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
        buf[8..16].copy_from_slice(&(1u64 << set).to_ne_bytes());
        // SAFETY: GSSET_INFO reads the 16-byte header and writes it back with one u32 for
        // each set asked that the device has: one here, 20 bytes in all, within the 24.
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        let mask = u64::from_ne_bytes(buf[8..16].try_into().expect("8 bytes"));
        if mask & (1 << set) == 0 {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        }
        Ok(read_u32(&buf, 16) as usize)
    }

    /// The names of string set `set` of `iface` (`ETHTOOL_GSTRINGS`).
    fn strings(&self, iface: &str, set: u32) -> io::Result<Vec<String>> {
        let len = self.string_set_len(iface, set)?;
        if len == 0 {
            // The kernel warns (WARN_ON_ONCE) when asked for the strings of an empty set.
            return Ok(Vec::new());
        }
        let mut buf = GuardedBuffer::new(12 + len * ETH_GSTRING_LEN)?;
        let bytes = buf.bytes_mut();
        bytes[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        bytes[4..8].copy_from_slice(&set.to_ne_bytes());
        // SAFETY: GSTRINGS writes a 12-byte header and the set's current count of 32-byte
        // names, whatever count the header held; a count that grew since GSSET_INFO runs into
        // the guard page, which the kernel answers with EFAULT (never a write past the
        // mapping).
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        let bytes = buf.bytes();
        let got = read_u32(bytes, 8) as usize;
        let fit = (bytes.len() - 12) / ETH_GSTRING_LEN;
        Ok((0..got.min(fit)).map(|i| c_string(&bytes[12 + i * ETH_GSTRING_LEN..][..ETH_GSTRING_LEN])).collect())
    }

    /// The names of the driver's statistics of `iface`, in the order [`Ethtool::stats`]
    /// returns their values.
    pub fn stat_names(&self, iface: &str) -> io::Result<Vec<String>> {
        self.strings(iface, ETH_SS_STATS)
    }

    /// The values of the driver's statistics of `iface` (`ETHTOOL_GSTATS`). `expected` is the
    /// count of [`Ethtool::stat_names`]; a driver whose count changed since answers with a
    /// different length, or EFAULT where it grew, which the caller should take as a cue to
    /// read the names again. No call is made for `expected` 0.
    pub fn stats(&self, iface: &str, expected: usize) -> io::Result<Vec<u64>> {
        if expected == 0 {
            // As for strings: the kernel warns when asked for the values of no statistics.
            return Ok(Vec::new());
        }
        let mut buf = GuardedBuffer::new(8 + expected * 8)?;
        buf.bytes_mut()[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        // SAFETY: GSTATS writes an 8-byte header and the driver's current count of u64
        // values, whatever count the header held; a count larger than `expected` runs into
        // the guard page and fails with EFAULT instead of writing past the mapping.
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        let bytes = buf.bytes();
        let got = read_u32(bytes, 4) as usize;
        let fit = (bytes.len() - 8) / 8;
        Ok((0..got.min(fit))
            .map(|i| u64::from_ne_bytes(bytes[8 + i * 8..][..8].try_into().expect("8 bytes")))
            .collect())
    }

    /// Every netdev feature of `iface` with its state (`ethtool -k`).
    pub fn features(&self, iface: &str) -> io::Result<Vec<Feature>> {
        let names = self.strings(iface, ETH_SS_FEATURES)?;
        let blocks = names.len().div_ceil(32);
        // struct ethtool_gfeatures: cmd, size (blocks), then per block of 32 features
        // available, requested, active, never_changed (u32 each).
        let mut buf = vec![0u8; 8 + blocks * 16];
        buf[..4].copy_from_slice(&ETHTOOL_GFEATURES.to_ne_bytes());
        buf[4..8].copy_from_slice(&(blocks as u32).to_ne_bytes());
        // SAFETY: GFEATURES writes the 8-byte header and at most `size` blocks of 16 bytes
        // (the kernel copies min(size, its own count)): `buf` has room for `size` blocks.
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        let bit = |field: usize, i: usize| (read_u32(&buf, 8 + (i / 32) * 16 + field * 4) >> (i % 32)) & 1 == 1;
        Ok(names
            .into_iter()
            .enumerate()
            .map(|(i, name)| Feature { name, available: bit(0, i), active: bit(2, i) })
            .collect())
    }

    /// Interrupt coalescing of `iface` (`ethtool -c`), by `ethtool -C`'s names.
    pub fn coalesce(&self, iface: &str) -> io::Result<Vec<(&'static str, u32)>> {
        let mut buf = [0u8; COALESCE_LEN];
        buf[..4].copy_from_slice(&ETHTOOL_GCOALESCE.to_ne_bytes());
        // SAFETY: GCOALESCE reads and writes one struct ethtool_coalesce, COALESCE_LEN bytes.
        unsafe { self.ethtool(iface, buf.as_mut_ptr()) }?;
        Ok(COALESCE_NAMES.iter().enumerate().map(|(i, &name)| (name, read_u32(&buf, 4 + i * 4))).collect())
    }

    /// The index of interface `name` (`SIOCGIFINDEX`).
    pub fn interface_index(&self, name: &str) -> io::Result<u32> {
        let mut ifr = ifreq(name)?;
        // SAFETY: `ifr` is a live ifreq; SIOCGIFINDEX reads its name and writes its index.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut ifr) })?;
        // SAFETY: the kernel wrote the index member of the union.
        Ok(unsafe { ifr.ifr_ifru.ifru_ifindex } as u32)
    }

    /// The name of the interface with index `index` (`SIOCGIFNAME`).
    pub fn interface_name(&self, index: u32) -> io::Result<String> {
        // SAFETY: ifreq is plain old data; all-zero is valid.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        ifr.ifr_ifru.ifru_ifindex = index as libc::c_int;
        // SAFETY: `ifr` is a live ifreq; SIOCGIFNAME reads its index and writes its name,
        // NUL-terminated within IFNAMSIZ.
        check(unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFNAME as _, &mut ifr) })?;
        let name: Vec<u8> = ifr.ifr_name.iter().map(|&c| c as u8).collect();
        Ok(c_string(&name))
    }
}

/// An ifreq naming `iface`; InvalidInput where the name cannot be an interface's.
fn ifreq(iface: &str) -> io::Result<libc::ifreq> {
    if iface.is_empty() || iface.len() >= libc::IFNAMSIZ || iface.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{iface:?} is not an interface name")));
    }
    // SAFETY: ifreq is plain old data; all-zero is valid (and NUL-terminates the name).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(iface.as_bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(ifr)
}

fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// The text of a fixed-size, NUL-padded field.
fn c_string(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// Zeroed anonymous pages followed by one inaccessible guard page.
///
/// `ETHTOOL_GSTRINGS` and `ETHTOOL_GSTATS` write as many entries as the driver has at the
/// moment of the call, not as many as the caller made room for, and a driver's count can grow
/// between asking for it and reading them (channels reconfigured). Here such a write reaches
/// the guard page, where the kernel's copy faults and the ioctl fails with EFAULT: no write
/// can land outside this mapping.
struct GuardedBuffer {
    ptr: NonNull<u8>,
    usable: usize,
    page: usize,
}

impl GuardedBuffer {
    fn new(bytes: usize) -> io::Result<Self> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        let usable = bytes.max(1).div_ceil(page) * page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                usable + page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        let buffer = Self { ptr, usable, page };
        // SAFETY: the last page lies inside the mapping made above (`usable` is a page
        // multiple, so it is page-aligned).
        check(unsafe { libc::mprotect(raw.cast::<u8>().add(usable).cast(), page, libc::PROT_NONE) })?;
        Ok(buffer)
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `usable` bytes of the mapping are readable, initialized (zeroed by
        // mmap) and owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.usable) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.usable) }
    }
}

impl Drop for GuardedBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, which no reference outlives.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.usable + self.page) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_an_index_but_no_driver_statistics() {
        let eth = Ethtool::open().unwrap();
        let index = eth.interface_index("lo").unwrap();
        assert_eq!(eth.interface_name(index).unwrap(), "lo");
        let err = eth.stat_names("lo").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP), "{err}");
        assert_eq!(eth.interface_index("nc-no-such0").unwrap_err().raw_os_error(), Some(libc::ENODEV));
        assert_eq!(eth.interface_index("a-name-far-too-long").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn loopback_features_include_its_offloads() {
        let eth = Ethtool::open().unwrap();
        let features = eth.features("lo").unwrap();
        let on = |n: &str| features.iter().find(|f| f.name == n).map(|f| f.active);
        // Loopback does checksums and segmentation in software for free.
        assert_eq!(on("tx-scatter-gather"), Some(true), "{features:?}");
        assert!(on("rx-gro").is_some());
    }

    #[test]
    fn a_guarded_buffer_faults_past_its_end_instead_of_overrunning() {
        let mut b = GuardedBuffer::new(10).unwrap();
        assert_eq!(b.bytes().len(), b.page);
        assert!(b.bytes().iter().all(|&x| x == 0));
        let page = b.page;
        b.bytes_mut()[page - 1] = 7;
        // The kernel's copy into the guard page fails rather than writes: read(2) from
        // /dev/zero across the end of the usable pages.
        let zero = std::fs::File::open("/dev/zero").unwrap();
        // SAFETY: writes into the mapping go to its usable pages or fault at the guard page.
        let n = unsafe { libc::read(zero.as_raw_fd(), b.as_mut_ptr().add(b.page - 8).cast(), 64) };
        assert!(n == 8 || n == -1, "read {n} bytes across the guard page");
    }
}
