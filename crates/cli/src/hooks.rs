//! The user's commands around tests (issue 23): `--step-cmd` before and after each step of a
//! sweep, suite or plan, with the step's rate and size in its environment, and `--reset-cmd`
//! before each `--repeat` iteration, then the wait until the server answers again.
//!
//! A command runs as `sh -c COMMAND` with a timeout; its exit status and the first
//! [`KEPT_OUTPUT_BYTES`] of its standard output and error go into the result
//! ([`netchar_model::CommandRun`]). A command that fails is recorded, never fatal: the sweep
//! goes on, and the record says what happened.

use netchar_engine::client::{ClientConfig, Family};
use netchar_model::{CommandRun, Direction, ResetRecord, StepRecord, TestResult, TestSpec, UdpRate};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of each of a command's standard output and error kept in the result; the rest is
/// counted (`truncated_bytes`). Enough for a register dump or an `ethtool -S`.
pub(crate) const KEPT_OUTPUT_BYTES: usize = 16 * 1024;

/// How long the output of a command that exited is still read: a background child it left
/// (a server it restarted) may hold its pipes open for good.
const OUTPUT_GRACE: Duration = Duration::from_millis(200);

/// A user's command and how long it may take.
#[derive(Debug, Clone)]
pub(crate) struct UserCommand {
    pub(crate) command: String,
    pub(crate) timeout: Duration,
}

impl UserCommand {
    /// From `--X-cmd` and `--X-timeout` (seconds); None without a command.
    pub(crate) fn from_flags(
        flag: &str,
        command: Option<&str>,
        timeout_flag: &str,
        timeout: &str,
    ) -> anyhow::Result<Option<Self>> {
        let Some(command) = command else { return Ok(None) };
        anyhow::ensure!(!command.trim().is_empty(), "{flag}: the command is empty; give a shell command");
        let secs = crate::flags::seconds(timeout_flag, timeout)?;
        anyhow::ensure!(secs > 0.0, "{timeout_flag} {timeout}: give a positive number of seconds");
        Ok(Some(Self { command: command.to_string(), timeout: Duration::from_secs_f64(secs) }))
    }

    /// `--step-cmd CMD [--step-timeout SECS]` of a sweep, suite or plan, checked.
    pub(crate) fn of_step(step: &crate::args::StepArgs) -> anyhow::Result<Option<Self>> {
        Self::from_flags("--step-cmd", step.step_cmd.as_deref(), "--step-timeout", &step.step_timeout)
    }

    /// Runs the command with `env` added to netchar's environment, and records the run.
    pub(crate) fn run(&self, phase: &str, env: BTreeMap<String, String>) -> CommandRun {
        let mut record = CommandRun { phase: phase.into(), command: self.command.clone(), env, ..Default::default() };
        let start = Instant::now();
        // Its own process group: a command that times out is killed with everything it started
        // in it (`timeout(1)` does the same), not only the shell.
        let child = Command::new("sh")
            .process_group(0)
            .arg("-c")
            .arg(&self.command)
            .envs(&record.env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                record.error = Some(format!("cannot start sh -c: {e}"));
                return record;
            }
        };
        let out = Captured::read(child.stdout.take());
        let err = Captured::read(child.stderr.take());
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    record.exit_code = status.code();
                    break;
                }
                Ok(None) if start.elapsed() >= self.timeout => {
                    // The whole group: a hung `ssh board ...` under the shell included. What left
                    // the group (setsid, a service manager's restart) is the user's and stays.
                    let _ = netchar_sys::process::kill_group(child.id());
                    let _ = child.kill();
                    let _ = child.wait();
                    record.timed_out = true;
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    record.error = Some(format!("waiting for it: {e}"));
                    break;
                }
            }
        }
        record.seconds = start.elapsed().as_secs_f64();
        let deadline = Instant::now() + OUTPUT_GRACE;
        (record.stdout, record.truncated_bytes[0]) = out.take(deadline);
        (record.stderr, record.truncated_bytes[1]) = err.take(deadline);
        record
    }
}

/// One output stream of a command, read on a thread of its own into a bounded buffer.
struct Captured {
    buf: Arc<Mutex<(Vec<u8>, u64)>>,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl Captured {
    fn read(pipe: Option<impl Read + Send + 'static>) -> Self {
        let buf = Arc::new(Mutex::new((Vec::new(), 0u64)));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(pipe.is_none()));
        if let Some(mut pipe) = pipe {
            let (buf, done) = (buf.clone(), done.clone());
            // Detached: it ends when the last writer closes the pipe.
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = pipe.read(&mut chunk) {
                    let mut b = buf.lock().unwrap_or_else(|p| p.into_inner());
                    let room = KEPT_OUTPUT_BYTES.saturating_sub(b.0.len()).min(n);
                    b.0.extend_from_slice(&chunk[..room]);
                    b.1 += (n - room) as u64;
                }
                done.store(true, Ordering::Release);
            });
        }
        Self { buf, done }
    }

    /// What was read by the end of the stream or `deadline`, whichever comes first, and the
    /// bytes beyond what is kept.
    fn take(&self, deadline: Instant) -> (String, u64) {
        while !self.done.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let b = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        (String::from_utf8_lossy(&b.0).into_owned(), b.1)
    }
}

/// `--step-cmd`: the command, and the count of the job's steps so far (shared by the plan's
/// clones, so that every step of the job has its own number).
#[derive(Debug, Clone)]
pub(crate) struct StepCommand {
    pub(crate) command: Option<UserCommand>,
    steps: Arc<AtomicU32>,
}

impl StepCommand {
    pub(crate) fn new(command: Option<UserCommand>) -> Self {
        Self { command, steps: Arc::new(AtomicU32::new(0)) }
    }

    /// The next step, the test `client` runs, begins: its number, and the command's run
    /// before it.
    pub(crate) fn begin(&self, client: &ClientConfig) -> Step {
        let index = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let env = step_env(index, &client.spec, block_bytes(client));
        let mut record = StepRecord { index, ..Default::default() };
        if let Some(c) = &self.command {
            let mut env = env.clone();
            env.insert("NETCHAR_PHASE".into(), "before".into());
            record.commands.push(c.run("before", env));
        }
        Step { record, env, command: self.command.clone() }
    }
}

/// A step under way: what its `--step-cmd` got before it.
#[derive(Debug)]
pub(crate) struct Step {
    record: StepRecord,
    env: BTreeMap<String, String>,
    command: Option<UserCommand>,
}

impl Step {
    /// The step ended: the command's run after it, and the record into `result` (if any).
    pub(crate) fn end(mut self, result: Option<&mut TestResult>) {
        if let Some(c) = &self.command {
            self.env.insert("NETCHAR_PHASE".into(), "after".into());
            let env = std::mem::take(&mut self.env);
            self.record.commands.push(c.run("after", env));
        }
        if let Some(r) = result {
            r.step = Some(self.record);
        }
    }
}

/// The bytes per write or datagram the test will use. A UDP test without `-l` has them
/// chosen as it connects, by the address family (client.rs `Driver::connect`): the first
/// address the host resolves to (of `-4`/`-6`'s family) picks it here alike.
fn block_bytes(client: &ClientConfig) -> u64 {
    use std::net::ToSocketAddrs;
    let spec = &client.spec;
    if spec.kind != netchar_model::TestKind::Udp || spec.block_bytes != 0 {
        return spec.block_bytes;
    }
    let ipv4 = match client.family {
        Some(Family::V4) => true,
        Some(Family::V6) => false,
        None => (client.host.as_str(), client.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .is_none_or(|a| a.is_ipv4()),
    };
    client.protocol.protocol().def().udp_payload.unwrap_or(if ipv4 { 1472 } else { 1452 })
}

/// The environment of a step's command: its number, the offered rate (0: as fast as
/// possible), the block size, the direction and the protocol.
fn step_env(index: u32, spec: &TestSpec, block_bytes: u64) -> BTreeMap<String, String> {
    let rate = match spec.udp.as_ref().map(|u| u.rate) {
        Some(UdpRate::BitsPerSecond(b)) => b,
        _ => spec.tcp.rate_bps_per_stream.map_or(0, |r| r.saturating_mul(u64::from(spec.streams))),
    };
    let direction = match spec.direction {
        Direction::Up => "up",
        Direction::Down => "down",
        Direction::Bidir => "bidir",
    };
    [
        ("NETCHAR_STEP", index.to_string()),
        ("NETCHAR_RATE_BPS", rate.to_string()),
        ("NETCHAR_BLOCK_BYTES", block_bytes.to_string()),
        ("NETCHAR_DIRECTION", direction.to_string()),
        ("NETCHAR_PROTOCOL", spec.kind.name().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `--reset-cmd`: the command, and how long the server may take to answer after it.
#[derive(Debug, Clone)]
pub(crate) struct ResetCommand {
    pub(crate) command: UserCommand,
    pub(crate) ready_timeout: Duration,
}

impl ResetCommand {
    /// Runs the command before iteration `iteration` (from 1), then tries TCP connections to
    /// `host`:`port` until one is accepted or `ready_timeout` has passed since the command's
    /// start.
    pub(crate) fn run(&self, iteration: u32, host: &str, port: u16) -> ResetRecord {
        let start = Instant::now();
        let env = [("NETCHAR_ITERATION", iteration.to_string()), ("NETCHAR_PHASE", "reset".to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let command = self.command.run("reset", env);
        let mut record = ResetRecord { command, time_to_ready_seconds: None, probes: 0 };
        let deadline = start + self.ready_timeout;
        while Instant::now() < deadline {
            record.probes += 1;
            if answers(host, port, deadline) {
                record.time_to_ready_seconds = Some(start.elapsed().as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        record
    }
}

/// The server accepts a TCP connection on `port` (the control port) before `deadline`.
fn answers(host: &str, port: u16, deadline: Instant) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(addrs) = (host, port).to_socket_addrs() else { return false };
    addrs.into_iter().any(|a| {
        let left = deadline.saturating_duration_since(Instant::now()).min(Duration::from_secs(1));
        !left.is_zero() && std::net::TcpStream::connect_timeout(&a, left).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(text: &str, secs: f64) -> UserCommand {
        UserCommand { command: text.into(), timeout: Duration::from_secs_f64(secs) }
    }

    #[test]
    fn a_command_gets_its_environment_and_keeps_its_output_and_status() {
        let env = [("NETCHAR_STEP".to_string(), "7".to_string())].into_iter().collect();
        let r = cmd("echo step=$NETCHAR_STEP; echo oops >&2; exit 3", 10.0).run("before", env);
        assert_eq!((r.stdout.as_str(), r.stderr.as_str(), r.exit_code), ("step=7\n", "oops\n", Some(3)));
        assert!(!r.succeeded() && !r.timed_out);
    }

    #[test]
    fn output_beyond_the_cap_is_counted_not_kept() {
        let r = cmd("head -c 20000 /dev/zero", 10.0).run("after", BTreeMap::new());
        assert_eq!(r.stdout.len(), KEPT_OUTPUT_BYTES);
        assert_eq!(r.truncated_bytes, [20000 - KEPT_OUTPUT_BYTES as u64, 0]);
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_and_recorded() {
        let r = cmd("exec sleep 30", 0.2).run("before", BTreeMap::new());
        assert!(r.timed_out && r.exit_code.is_none(), "{r:?}");
    }

    /// A timed-out command's children die with it (the shell's foreground child and one it
    /// put in the background), and one that left the group with setsid does not.
    #[test]
    fn a_timed_out_command_takes_its_process_group_with_it() {
        let dir = std::env::temp_dir().join(format!("netchar-hooks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pids = |name: &str| dir.join(name).display().to_string();
        let script = format!(
            "sleep 31 & echo $! > {bg}; setsid sleep 32 & echo $! > {away}; sleep 33 & echo $! > {fg}; wait",
            bg = pids("bg"),
            away = pids("away"),
            fg = pids("fg")
        );
        let r = cmd(&script, 0.5).run("before", BTreeMap::new());
        assert!(r.timed_out, "{r:?}");
        let pid = |name: &str| -> i32 { std::fs::read_to_string(dir.join(name)).unwrap().trim().parse().unwrap() };
        // A process is gone once its /proc entry is (or it is a zombie nobody reaped yet).
        let alive = |p: i32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while (alive(pid("bg")) || alive(pid("fg"))) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let away = pid("away");
        let survivors = (alive(pid("bg")), alive(pid("fg")), alive(away));
        let _ =
            rustix::process::kill_process(rustix::process::Pid::from_raw(away).unwrap(), rustix::process::Signal::KILL);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(survivors, (false, false, true), "(background, foreground, setsid) alive after the timeout");
    }
}
