//! The target's console as it arrives: a serial port (`--console DEVICE[:BAUD]`) or the
//! output of a command run with `sh -c` (`--console-cmd`), read on threads of its own and cut
//! into lines, each stamped with the monotonic clock when its first byte arrived.
//!
//! It knows nothing of the test's clock or of what a line means: the CLI puts the lines on
//! the test's clock, and `netchar_model::console` flags them. The capture is bounded
//! ([`ConsoleLimits`]); what does not fit is counted, not kept.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where the console comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsoleSource {
    /// A serial port at a speed in baud, 8N1, no flow control.
    Serial {
        /// The device: `/dev/ttyUSB0`.
        device: String,
        /// Bits per second.
        baud: u32,
    },
    /// A command whose output (stdout and stderr) is the console, run with `sh -c`.
    Command(String),
}

impl ConsoleSource {
    /// How a result names it: `serial /dev/ttyUSB0 115200`, `command ssh board dmesg -w`.
    pub fn describe(&self) -> String {
        match self {
            Self::Serial { device, baud } => format!("serial {device} {baud}"),
            Self::Command(cmd) => format!("command {cmd}"),
        }
    }
}

/// Why the console could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The serial port would not open (missing device, no permission, not a tty).
    #[error(
        "cannot open the console {device}: {message}; check the device (--console DEVICE[:BAUD]) and its permissions"
    )]
    Open {
        /// The device.
        device: String,
        /// The system's reason.
        message: String,
    },
    /// `sh` could not be started.
    #[error("cannot start the console command `{command}`: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The system's reason.
        source: io::Error,
    },
    /// The command ended with a failure before the test started.
    #[error("the console command `{command}` failed before the test started ({status}){said}; check --console-cmd")]
    Failed {
        /// The command.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// `: ` and its last line of output, or nothing.
        said: String,
    },
}

/// How much of one test's console is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsoleLimits {
    /// Lines kept; later ones are counted as dropped.
    pub max_lines: usize,
    /// Bytes of text kept, over all lines; lines past it are counted as dropped.
    pub max_bytes: usize,
    /// A longer line is cut into pieces of this many bytes.
    pub max_line_bytes: usize,
}

impl Default for ConsoleLimits {
    /// 10 000 lines and 1 MiB: a chatty debug console over a minute's test, and still a
    /// result file one can open.
    fn default() -> Self {
        Self { max_lines: 10_000, max_bytes: 1 << 20, max_line_bytes: 1024 }
    }
}

/// Bytes in, bounded lines out: the line cutting of a console, with time passed in (`T` is
/// an `Instant` when reading, anything in tests).
#[derive(Debug, Clone)]
pub struct LineCollector<T> {
    limits: ConsoleLimits,
    /// The lines kept: when each began, and its text.
    pub lines: Vec<(T, String)>,
    kept_bytes: usize,
    /// Lines past the limits.
    pub dropped: u64,
    partial: Vec<u8>,
    partial_since: Option<T>,
}

impl<T: Copy> LineCollector<T> {
    /// An empty collector.
    pub fn new(limits: ConsoleLimits) -> Self {
        Self { limits, lines: Vec::new(), kept_bytes: 0, dropped: 0, partial: Vec::new(), partial_since: None }
    }

    /// Bytes that arrived at `now`. `\n` ends a line; `\r` and other control characters
    /// (but tab) are dropped.
    pub fn feed(&mut self, now: T, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.end_line();
                continue;
            }
            if b.is_ascii_control() && b != b'\t' {
                continue;
            }
            self.partial_since.get_or_insert(now);
            self.partial.push(b);
            if self.partial.len() >= self.limits.max_line_bytes {
                self.end_line();
            }
        }
    }

    /// Whether any byte has arrived.
    pub fn heard(&self) -> bool {
        !self.lines.is_empty() || self.dropped > 0 || !self.partial.is_empty()
    }

    /// The line in progress, if any, ends here (the capture stops).
    pub fn flush(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let text = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        let Some(at) = self.partial_since.take() else {
            // A line with no byte kept (an empty line, or only `\r`): not worth a record.
            return;
        };
        if self.lines.len() >= self.limits.max_lines || self.kept_bytes + text.len() > self.limits.max_bytes {
            self.dropped += 1;
            return;
        }
        self.kept_bytes += text.len();
        self.lines.push((at, text));
    }
}

/// What a capture read.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The lines kept, when each began, in order of arrival.
    pub lines: Vec<(Instant, String)>,
    /// Lines past the limits.
    pub dropped: u64,
    /// When and why the console ended, if it did before the capture stopped.
    pub ended: Option<(Instant, String)>,
}

struct Shared {
    collector: LineCollector<Instant>,
    /// Readers still reading; the console has ended when this reaches 0.
    open_readers: usize,
    ended: Option<(Instant, String)>,
}

/// A console being read; [`ConsoleReader::finish`] stops it and hands over the lines.
pub struct ConsoleReader {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    child: Option<Child>,
    command: Option<String>,
    /// The serial port's reader, joined when the capture stops: it holds the port open
    /// (exclusively), and the next run (`--repeat`) opens it again.
    serial_reader: Option<std::thread::JoinHandle<()>>,
}

/// How long a serial read waits before it looks at the stop flag.
const SERIAL_POLL: Duration = Duration::from_millis(100);

impl ConsoleReader {
    /// Opens the console and starts reading it.
    pub fn start(source: &ConsoleSource, limits: ConsoleLimits) -> Result<Self, ConsoleError> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut inputs: Vec<Box<dyn Read + Send>> = Vec::new();
        let (mut child, mut command) = (None, None);
        match source {
            ConsoleSource::Serial { device, baud } => {
                let port = serialport::new(device.as_str(), *baud)
                    .timeout(SERIAL_POLL)
                    .open_native()
                    .map_err(|e| ConsoleError::Open { device: device.clone(), message: e.description })?;
                inputs.push(Box::new(port));
            }
            ConsoleSource::Command(cmd) => {
                let mut c = Command::new("sh");
                // Its own process group, so that stopping it stops what it started (ssh,
                // qemu, a pipeline), not only `sh`.
                std::os::unix::process::CommandExt::process_group(&mut c, 0);
                c.arg("-c").arg(cmd).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
                let mut ch = c.spawn().map_err(|source| ConsoleError::Spawn { command: cmd.clone(), source })?;
                inputs.extend(ch.stdout.take().map(|o| Box::new(o) as Box<dyn Read + Send>));
                inputs.extend(ch.stderr.take().map(|o| Box::new(o) as Box<dyn Read + Send>));
                child = Some(ch);
                command = Some(cmd.clone());
            }
        }
        let shared = Arc::new(Mutex::new(Shared {
            collector: LineCollector::new(limits),
            open_readers: inputs.len(),
            ended: None,
        }));
        let mut readers = Vec::new();
        for input in inputs {
            let (shared, stop) = (shared.clone(), stop.clone());
            readers.push(
                std::thread::Builder::new()
                    .name("console".into())
                    .spawn(move || read_lines(input, &shared, &stop))
                    .map_err(|e| ConsoleError::Spawn { command: source.describe(), source: e })?,
            );
        }
        // A command's readers are not joined: a grandchild may keep its pipe open after the
        // group is killed, and a read of it would never return. Each ends at its next read.
        let serial_reader = if child.is_none() { readers.pop() } else { None };
        Ok(Self { shared, stop, child, command, serial_reader })
    }

    /// Waits, up to `limit`, for the console's first byte or its command's end; a command
    /// that failed before then is an error (it was not found, or could not reach the board).
    /// A serial port is ready once open.
    pub fn wait_started(&mut self, limit: Duration) -> Result<(), ConsoleError> {
        let (Some(child), Some(command)) = (self.child.as_mut(), self.command.as_ref()) else { return Ok(()) };
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                if status.success() {
                    return Ok(());
                }
                // Its output may still be on its way from the pipes.
                std::thread::sleep(Duration::from_millis(20));
                let shared = lock(&self.shared);
                let mut c = shared.collector.clone();
                c.flush();
                let said = c.lines.last().map(|(_, l)| format!(": {l}")).unwrap_or_default();
                return Err(ConsoleError::Failed { command: command.clone(), status, said });
            }
            if lock(&self.shared).collector.heard() || Instant::now() >= until {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops reading (and the command) and returns what was read.
    pub fn finish(mut self) -> Capture {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(reader) = self.serial_reader.take() {
            // Within one SERIAL_POLL: its reads time out.
            let _ = reader.join();
        }
        let mut shared = lock(&self.shared);
        shared.collector.flush();
        let capture = Capture {
            lines: std::mem::take(&mut shared.collector.lines),
            dropped: shared.collector.dropped,
            ended: shared.ended.take(),
        };
        drop(shared);
        if let Some(child) = self.child.as_mut() {
            kill_group(child);
        }
        capture
    }
}

impl Drop for ConsoleReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

fn read_lines(mut input: Box<dyn Read + Send>, shared: &Mutex<Shared>, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    let why = loop {
        let read = input.read(&mut buf);
        if let Ok(n @ 1..) = read {
            lock(shared).collector.feed(Instant::now(), &buf[..n]);
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match read {
            Ok(0) => break "end of output".to_string(),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::Interrupted) => {}
            // A serial port that went away (a USB adapter unplugged, the other side of a pty
            // closed): the console's end, not an error of netchar's. Bytes still buffered may be
            // lost: the port reports the hangup before them.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe || e.raw_os_error() == Some(libc::EIO) => {
                break "hung up".into()
            }
            Err(e) => break format!("read error: {e}"),
        }
    };
    let mut s = lock(shared);
    s.open_readers -= 1;
    if s.open_readers == 0 {
        s.ended = Some((Instant::now(), why));
    }
}

/// Ends the command's process group and reaps `sh`.
fn kill_group(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) takes no pointers; -pid names the group the child leads
        // (process_group(0) above), which holds only what the console command started.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_at_newlines_and_stamped_with_their_first_byte() {
        let mut c = LineCollector::new(ConsoleLimits::default());
        c.feed(1, b"boot");
        c.feed(2, b"ing\r\nready\n\n");
        c.feed(3, b"tail");
        c.flush();
        assert_eq!(c.lines, vec![(1, "booting".into()), (2, "ready".into()), (3, "tail".into())]);
        assert_eq!(c.dropped, 0);
    }

    #[test]
    fn lines_past_the_limits_are_counted_not_kept() {
        let limits = ConsoleLimits { max_lines: 2, max_bytes: 1000, max_line_bytes: 4 };
        let mut c = LineCollector::new(limits);
        c.feed(0, b"abcdefgh\nx\ny\nz\n");
        assert_eq!(c.lines, vec![(0, "abcd".into()), (0, "efgh".into())]);
        assert_eq!(c.dropped, 3);
        let mut c = LineCollector::new(ConsoleLimits { max_lines: 100, max_bytes: 5, max_line_bytes: 100 });
        c.feed(0, b"abc\ndef\ng\n");
        assert_eq!(c.lines, vec![(0, "abc".into()), (0, "g".into())]);
        assert_eq!(c.dropped, 1);
    }

    #[test]
    fn a_command_that_fails_at_once_is_an_error_naming_what_it_said() {
        let source = ConsoleSource::Command("echo no such board >&2; exit 3".into());
        let mut r = ConsoleReader::start(&source, ConsoleLimits::default()).unwrap();
        let e = r.wait_started(Duration::from_secs(30)).unwrap_err().to_string();
        assert!(e.contains("exit status: 3") && e.contains("no such board"), "{e}");
    }

    #[test]
    fn a_missing_device_is_an_error_naming_it() {
        let source = ConsoleSource::Serial { device: "/dev/netchar-no-such-tty".into(), baud: 115_200 };
        let e = ConsoleReader::start(&source, ConsoleLimits::default()).err().unwrap().to_string();
        assert!(e.contains("/dev/netchar-no-such-tty"), "{e}");
    }
}
