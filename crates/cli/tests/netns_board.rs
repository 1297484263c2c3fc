//! The C responder as bare-metal firmware on an emulated microcontroller, measured from the
//! host: QEMU's mps2-an386 board (Cortex-M4, LAN9118 Ethernet) running lwIP 2.1.3 with
//! NO_SYS=1 and the raw API (responder/ports/mps2-an386, docs/embedded.md "A board").
//!
//! `make -C responder board` builds two images: the native protocol, and the eCos nc_test
//! slave, the netio server and echo/discard. Each test boots one with
//! `qemu-system-arm -M mps2-an386 -nographic -no-reboot -kernel IMAGE -nic tap,...,model=lan9118
//! [-icount shift=5,align=on]` (at niceness -10) in namespace `a`, which holds the TAP device
//! (10.77.0.1/24; the board is 10.77.0.2). The client runs in namespace `b` and reaches the board through `a`,
//! which forwards; `b` also has an address outside the board's allowed networks
//! (NC_ALLOW_PEERS 10.0.0.0/8) for the reflection checks. The board must print its ready line
//! on its UART (QEMU's stdout) within 5 s; a board that does not, that faults, asserts or
//! resets (-no-reboot ends QEMU then) fails the test with its console in the message.
//!
//! Ground truth: both ends' byte counts (`-n`), an nft forward-hook rule in `a` that drops ≈2%
//! of the data datagrams (netchar's `lost` must equal its counter), and the board's own counts
//! on its console (the peer roles log what they received and sent).
//!
//! Under `-icount shift=5` the board's clock advances 32 ns per instruction, so the busy time
//! it reports (`cpu.remote.user_seconds`: the time its loop was not idle) is an instruction
//! count: the client, told so (`--target-ns-per-instruction 32`), puts instructions per byte,
//! datagram and transaction in the result's `target` beside the board's own counters, and
//! the tests hold them to the figures recorded for the board's build. The reflection guard's answer budget is checked
//! without `-icount`, where the board's clock is the host's.
//!
//! The peer image's nc_test slave runs nc_test's background load (SET_LOAD: a calibrated share
//! of the board's loop), so the eCos suite runs every section against it; each level asked is
//! held to the share the board says it ran and to the idle-loop counts it leaves. IPv6 (the
//! board's BOARD_IP6 on the TAP link) is measured from `a`, and a board image built with a
//! second BOARD_IP must carry and serve the second.
//!
//! Needs root, `ip`, `nft`, make, gcc-arm-none-eabi, libnewlib-arm-none-eabi, qemu-system-arm
//! and lwIP's source in responder/build/lwip (`make -C responder lwip-src`); otherwise it says
//! why and passes, unless NETCHAR_REQUIRE_ALL=1 (CI), in which case it fails.

#[path = "support/netns.rs"]
mod netns;

use netchar_wire::nc_test::{Kind, Reply, Request, Results, NAK_BAD_REQUEST, REPLY_LEN, RESULTS_LEN};
use netns::{ChildGuard, Finished, Link, Netns};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const NETCHAR: &str = env!("CARGO_BIN_EXE_netchar");
const TAP: &str = "ncbtap0";
/// The board's address, gateway and ports, as `make board` builds them (responder/Makefile).
const BOARD_IP: &str = "10.77.0.2";
const TAP_IP: &str = "10.77.0.1";
/// The board's static IPv6 address (`BOARD_IP6`), and the TAP's on the same /64.
const BOARD_IP6: &str = "fd00:77::2";
const TAP_IP6: &str = "fd00:77::1";
const PORT: u16 = 5300;
const NC_TEST_PORT: u16 = 7777;
const NC_TEST_DATA_PORT: u16 = 8770;
const NETIO_PORT: u16 = 18767;
const ECHO_PORT: u16 = 7;
const RESPONDER: &str = "netchar-responder 0.1";
/// The console line that says the board serves.
const READY: &str = "listening on";
/// The board's clock under `-icount shift=ICOUNT_SHIFT`: 2^5 = 32 ns per instruction.
const ICOUNT_SHIFT: u32 = 5;
const BOOT_LIMIT: Duration = Duration::from_secs(5);
/// First payload bytes of a netchar data datagram (setup datagrams are retried and must not be
/// dropped by the rule).
const DATA_PREFIX: &str = "0x4e430100";
/// The loss tests' datagrams: 200 bytes at 500 kbit/s. QEMU's LAN9118 holds 10560 bytes of
/// received frames (about 40 of these, 130 ms of this traffic) and counts none it drops; its
/// TAP backend hands it whatever the host queued at once. So the TAP device's queue is held to
/// TAP_QUEUE frames: a backlog a busy host leaves beyond that is dropped by the kernel, where
/// the TAP's counter sees it, instead of inside QEMU, where nothing does.
const PAYLOAD: u64 = 200;
const LOSS_RATE: &str = "500k";
const TAP_QUEUE: &str = "32";
const TABLE: &str = "ncboard";
const CHAIN: &str = "lossy";
/// The board's budget for answers outside its allowed networks (nc_config.h).
const ANSWER_RATE: f64 = 1_250_000.0;
const ANSWER_BURST: f64 = 65_536.0;

/// The board's instruction counts as recorded for a build (its identity, as the board reports it
/// in `remote_host.kernel`: compiler, optimisation, lwipopts.h's hash): per byte received over
/// TCP, per 1472-byte datagram received, per TCP rr transaction (docs/embedded.md, "Target-side
/// figures"). A run of that build must stay within `RECORDED_TOLERANCE` of them; another build
/// prints its figures to record.
/// The second build is the first with IPv6 in lwIP (and the raw transport's dual-stack
/// addresses): about 1% more per TCP byte and 3% per datagram over IPv4.
const RECORDED: &[(&str, f64, f64, f64)] = &[
    ("lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os, lwipopts 809da5f523f1", 5.86, 8850.0, 4850.0),
    ("lwIP 2.1.3 NO_SYS=1, gcc 12.2.1 -Os, lwipopts fc983f8c43e6", 5.94, 9126.0, 4846.0),
];
const RECORDED_TOLERANCE: f64 = 0.15;

/// One board at a time: each QEMU keeps a host CPU busy, and two on a small machine make the
/// emulated controllers drop frames.
static ONE_BOARD: Mutex<()> = Mutex::new(());

fn responder_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../responder")
}

/// `make -C responder board` once for the file: the two images, or why they cannot be built
/// or booted here.
fn images() -> Result<(PathBuf, PathBuf), String> {
    static BUILT: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            for (tool, arg, package) in [
                ("make", "--version", "make"),
                ("arm-none-eabi-gcc", "--version", "gcc-arm-none-eabi and libnewlib-arm-none-eabi"),
                ("nft", "--version", "nftables"),
            ] {
                if Command::new(tool).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_err() {
                    return Err(format!("`{tool}` cannot be run: apt-get install {package}"));
                }
            }
            let machines = Command::new("qemu-system-arm")
                .args(["-machine", "help"])
                .output()
                .map_err(|e| format!("`qemu-system-arm` cannot be run ({e}): apt-get install qemu-system-arm"))?;
            if !String::from_utf8_lossy(&machines.stdout).contains("mps2-an386") {
                return Err("this qemu-system-arm has no mps2-an386 machine".into());
            }
            let dir = responder_dir();
            if !dir.join("build/lwip/src/core/tcp.c").exists() {
                return Err("lwIP's source is not in responder/build/lwip: `make -C responder lwip-src` (apt-get \
                            source lwip, which needs deb-src lines)"
                    .into());
            }
            let out = Command::new("make").arg("-C").arg(&dir).arg("board-check").output().expect("run make");
            assert!(
                out.status.success(),
                "make -C responder board-check failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            // The footprint, for the log of the run.
            for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.starts_with("arm-none-eabi")) {
                eprintln!("{line}");
            }
            Ok((dir.join("build/board/netchar-board.elf"), dir.join("build/board-peers/netchar-board-peers.elf")))
        })
        .clone()
}

/// The namespaces: the TAP device in `a`, the client in `b`, routed through `a`.
struct Bed {
    link: Link,
    /// An address of `b` outside the board's allowed networks.
    outside: Ipv4Addr,
}

impl Bed {
    fn create() -> Result<Self, String> {
        let link = Link::create()?;
        let x = link.a_ip.octets()[2];
        let outside = Ipv4Addr::new(192, 168, x, 2);
        let (a, b) = (&link.a, &link.b);
        a.ip(&["tuntap", "add", "dev", TAP, "mode", "tap"])?;
        a.ip(&["link", "set", TAP, "txqueuelen", TAP_QUEUE])?;
        // No IPv6 on the TAP: the kernel's router and neighbour solicitations would be frames
        // the board has to read and drop.
        a.sysctl(&format!("net/ipv6/conf/{TAP}/disable_ipv6"), "1")?;
        a.ip(&["addr", "add", &format!("{TAP_IP}/24"), "dev", TAP])?;
        a.ip(&["link", "set", TAP, "up"])?;
        a.sysctl("net/ipv4/ip_forward", "1")?;
        b.ip(&["addr", "add", &format!("{outside}/24"), "dev", netns::DEV_B])?;
        b.ip(&["route", "add", "10.77.0.0/24", "via", &link.a_ip.to_string()])?;
        a.ip(&["route", "add", &format!("192.168.{x}.0/24"), "via", &link.b_ip.to_string()])?;
        Ok(Self { link, outside })
    }

    /// IPv6 on the TAP (which `create` leaves off): TAP_IP6/64, no duplicate address
    /// detection, so the board at BOARD_IP6 is reachable from `a` at once.
    fn enable_ipv6(&self) -> Result<(), String> {
        let a = &self.link.a;
        a.sysctl(&format!("net/ipv6/conf/{TAP}/disable_ipv6"), "0")?;
        a.ip(&["addr", "add", &format!("{TAP_IP6}/64"), "dev", TAP, "nodad"])?;
        Ok(())
    }

    /// Frames the kernel dropped at the TAP device (its queue to QEMU was full).
    fn tap_drops(&self) -> u64 {
        let out = self.link.a.command("cat").arg(format!("/sys/class/net/{TAP}/statistics/tx_dropped")).output();
        out.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).unwrap_or(0)
    }
}

/// A board booted in QEMU, its console (UART 0 on stdout, QEMU's own messages on stderr)
/// kept; killed on drop.
struct Board {
    child: ChildGuard,
    console: Arc<Mutex<String>>,
    booted_in: Duration,
}

impl Board {
    /// Boots `image`; with `icount`, the board's clock counts instructions (-icount), else it
    /// is the host's (QEMU's virtual clock without -icount follows real time).
    fn boot(bed: &Bed, image: &Path, icount: bool) -> Self {
        Self::boot_with(bed, image, icount, None)
    }

    /// [`Board::boot`], with UART 0 on a pseudo-terminal when `uart_log` is given (QEMU's
    /// `-chardev pty` with `logfile=`): a client can open it as a serial port (`--console`),
    /// while the test reads what the board prints from the log, which QEMU writes whether or
    /// not the pty is open.
    fn boot_with(bed: &Bed, image: &Path, icount: bool, uart_log: Option<&Path>) -> Self {
        // At a higher priority than the machine's other work (nice exec's QEMU): an emulated
        // board kept off the CPU lets its controller's FIFO overflow (PAYLOAD), and
        // its figures are what a host that runs it promptly measures.
        let mut cmd = bed.link.a.command("nice");
        cmd.args(["-n", "-10", "qemu-system-arm", "-M", "mps2-an386", "-nographic", "-no-reboot", "-kernel"])
            .arg(image)
            .args(["-nic", &format!("tap,ifname={TAP},script=no,downscript=no,model=lan9118")]);
        if icount {
            cmd.args(["-icount", &format!("shift={ICOUNT_SHIFT},align=on")]);
        }
        if let Some(log) = uart_log {
            cmd.args(["-chardev", &format!("pty,id=uart0,logfile={}", log.display()), "-serial", "chardev:uart0"]);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawn qemu-system-arm");
        let console = Arc::new(Mutex::new(String::new()));
        for pipe in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let console = console.clone();
            thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut c = console.lock().unwrap_or_else(|p| p.into_inner());
                    c.push_str(line.trim_end_matches('\r'));
                    c.push('\n');
                }
            });
        }
        if let Some(log) = uart_log {
            follow_log(log.to_path_buf(), Arc::downgrade(&console));
        }
        let mut board = Self { child: ChildGuard::new(child), console, booted_in: Duration::ZERO };
        while !board.console().contains(READY) {
            assert!(
                started.elapsed() < BOOT_LIMIT,
                "the board did not say it was ready within {BOOT_LIMIT:?}; its console:\n{}",
                board.console()
            );
            assert!(
                board.child.wait_timeout(Duration::from_millis(20)).is_none(),
                "QEMU exited while booting; its console:\n{}",
                board.console()
            );
        }
        board.booted_in = started.elapsed();
        eprintln!("board {} ready in {:?}: {}", image.display(), board.booted_in, board.line(READY));
        board
    }

    /// The pseudo-terminal QEMU put UART 0 on ([`Board::boot_with`] with a log).
    fn uart_pty(&self) -> String {
        let line = self.line("char device redirected to");
        let pts = line.split("redirected to ").nth(1).and_then(|r| r.split_whitespace().next());
        pts.unwrap_or_else(|| panic!("no pty in {line:?}")).to_string()
    }

    fn console(&self) -> String {
        self.console.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Console lines containing `needle`.
    fn lines(&self, needle: &str) -> Vec<String> {
        self.console().lines().filter(|l| l.contains(needle)).map(str::to_string).collect()
    }

    fn line(&self, needle: &str) -> String {
        self.lines(needle).pop().unwrap_or_else(|| panic!("no {needle:?} on the console:\n{}", self.console()))
    }

    /// The `count`-th console line containing `needle` (0-based), waited for up to `wait`.
    fn wait_line(&self, needle: &str, count: usize, wait: Duration) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let lines = self.lines(needle);
            if let Some(l) = lines.get(count) {
                return l.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} (#{count}) on the console within {wait:?}:\n{}",
                self.console()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Still running, booted once, no fault or failed assertion.
    fn assert_healthy(&mut self) {
        let exited = self.child.wait_timeout(Duration::from_millis(10));
        let console = self.console();
        assert!(exited.is_none(), "QEMU exited ({exited:?}): the board reset or stopped; its console:\n{console}");
        for bad in ["fault:", "assertion failed", "main returned"] {
            assert!(!console.contains(bad), "the board reported {bad:?}; its console:\n{console}");
        }
        assert_eq!(console.matches("booting").count(), 1, "the board rebooted; its console:\n{console}");
    }
}

/// Appends what QEMU writes to the UART's log file to `console`, line by line, until the
/// board is dropped.
fn follow_log(log: PathBuf, console: std::sync::Weak<Mutex<String>>) {
    thread::spawn(move || {
        let mut file = None;
        let mut partial = Vec::new();
        while let Some(console) = console.upgrade() {
            if file.is_none() {
                file = std::fs::File::open(&log).ok();
            }
            let mut chunk = Vec::new();
            if let Some(f) = file.as_mut() {
                let _ = f.read_to_end(&mut chunk);
            }
            for &b in &chunk {
                if b == b'\n' {
                    let mut c = console.lock().unwrap_or_else(|p| p.into_inner());
                    c.push_str(String::from_utf8_lossy(&partial).trim_end_matches('\r'));
                    c.push('\n');
                    partial.clear();
                } else {
                    partial.push(b);
                }
            }
            drop(console);
            thread::sleep(Duration::from_millis(20));
        }
    });
}

/// The console line the board prints with the results of each test.
const COUNTERS_LINE: &str = "target counters over the test";

/// The changes of the board's counters in one of its COUNTERS_LINE lines, in name order:
/// name → change.
fn console_counters(line: &str) -> Vec<(String, u64)> {
    let words: Vec<&str> = line.split("(since boot):").nth(1).unwrap_or("").split_whitespace().collect();
    let mut counters: Vec<(String, u64)> =
        words.chunks(3).filter(|c| c.len() == 3).map(|c| (c[0].to_string(), c[1].parse().unwrap_or(0))).collect();
    counters.sort();
    counters
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// `netchar ARGS --json` in `b`; the parsed output, and the run for messages.
fn netchar(bed: &Bed, board: &Board, args: &[&str]) -> Value {
    netchar_in(&bed.link.b, board, args)
}

/// `netchar ARGS --json` in namespace `ns`.
fn netchar_in(ns: &Netns, board: &Board, args: &[&str]) -> Value {
    let mut cmd = ns.command(NETCHAR);
    cmd.args(args).arg("--json");
    let shown = format!("{cmd:?}");
    let run = netns::run_with_timeout(cmd, Duration::from_secs(180)).unwrap_or_else(|e| panic!("{e}"));
    let context = context(&shown, &run, board);
    assert!(run.status.is_some_and(|s| s.success()), "netchar failed\n{context}\nstdout:\n{}", run.stdout);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{context}\nstdout:\n{}", run.stdout))
}

fn context(shown: &str, run: &Finished, board: &Board) -> String {
    format!(
        "client: {shown}\nclient exit: {:?} after {:?}\nclient stderr:\n{}\nboard console:\n{}",
        run.status,
        run.elapsed,
        run.stderr,
        board.console()
    )
}

/// A test of the native protocol against the board: the one result, error-free and measured
/// by the responder.
fn native(bed: &Bed, board: &Board, kind: &str, extra: &[&str]) -> Value {
    native_at(&bed.link.b, BOARD_IP, board, kind, extra)
}

/// [`native`] from namespace `ns` to the board's address `host`.
fn native_at(ns: &Netns, host: &str, board: &Board, kind: &str, extra: &[&str]) -> Value {
    let port = PORT.to_string();
    let shift = (1u32 << ICOUNT_SHIFT).to_string();
    let mut args = vec![kind, host, "-p", &port, "--target-ns-per-instruction", &shift];
    args.extend_from_slice(extra);
    let earlier = board.lines(COUNTERS_LINE).len();
    let doc = netchar_in(ns, board, &args);
    let doc = match doc {
        Value::Array(mut all) => {
            assert_eq!(all.len(), 1, "one result: {all:?}");
            all.remove(0)
        }
        one => one,
    };
    assert!(doc["error"].is_null(), "{}\nconsole:\n{}", doc["error"], board.console());
    assert_eq!(doc["test"]["peer_software"], RESPONDER, "{}", doc["test"]);
    let line = board.wait_line(COUNTERS_LINE, earlier, Duration::from_secs(5));
    check_target(&doc, &console_counters(&line));
    doc
}

/// The board's own figures in the client's result (`target`): the counters it printed on its
/// console for the test, the build it names, and derived figures that agree with the raw
/// ones: busy ns per unit × units = the busy time, instructions × 2^ICOUNT_SHIFT ns = the
/// busy ns, the idle share from the idle loop's counts, which with the busy share makes at
/// most the whole test.
fn check_target(doc: &Value, console: &[(String, u64)]) {
    let t = &doc["target"];
    let counters: Vec<(String, u64)> = t["counters"]
        .as_object()
        .unwrap_or_else(|| panic!("no target counters in the result: {t}"))
        .iter()
        .map(|(name, v)| (name.clone(), u(v)))
        .collect();
    assert_eq!(counters, console, "the result's target counters are the board's");
    // IPv4's counters, or IPv6's for a test over IPv6.
    for names in [["link_recv"; 2], ["link_xmit"; 2], ["ip_recv", "ip6_recv"], ["ip_xmit", "ip6_xmit"]] {
        assert!(counters.iter().any(|(n, v)| names.contains(&n.as_str()) && *v > 0), "{names:?} did not move: {t}");
    }
    assert_eq!(t["build"], doc["remote_host"]["kernel"], "{t}");
    let cpu = &doc["cpu"]["remote"];
    let busy = f(&cpu["user_seconds"]) + f(&cpu["system_seconds"]);
    assert!(busy > 0.0 && (f(&t["busy_seconds"]) - busy).abs() < 1e-9, "{t}\n{cpu}");
    let unit = t["unit"].as_str().unwrap_or_else(|| panic!("no unit: {t}"));
    let ns = f(&t[format!("busy_ns_per_{unit}")]);
    assert!((ns * u(&t["units"]) as f64 / 1e9 - busy).abs() <= busy * 1e-9, "{t}");
    let instructions = f(&t[format!("instructions_per_{unit}")]);
    assert!((instructions * f64::from(1u32 << ICOUNT_SHIFT) - ns).abs() <= ns * 1e-9, "{t}");
    let wall = f(&cpu["wall_seconds"]);
    let idle = u(&t["idle_count"]) as f64 / (u(&t["idle_per_second"]) as f64 * wall) * 100.0;
    assert!((f(&t["idle_pct"]) - idle).abs() < 1e-9, "{t}");
    let busy_pct = busy / wall * 100.0;
    assert!(idle + busy_pct <= 101.0, "idle {idle:.1}% + busy {busy_pct:.1}% of the test: {t}\n{cpu}");
}

/// The board's instructions per unit of work from the result (`target.instructions_per_UNIT`),
/// after checking that it counted `units` of them, the test's own count.
fn instructions(res: &Value, unit: &str, units: u64) -> f64 {
    let t = &res["target"];
    assert_eq!((t["unit"].as_str(), u(&t["units"])), (Some(unit), units), "{t}");
    f(&t[format!("instructions_per_{unit}")])
}

/// min, max and (max − min) / min of some figures.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::MAX, f64::min);
    let max = v.iter().copied().fold(0.0, f64::max);
    (min, max, (max - min) / min)
}

/// TCP with a byte budget: both ends counted exactly the budget; the rate the client saw and
/// the board's instructions per byte.
fn tcp_exact(bed: &Bed, board: &Board, extra: &[&str], flows: &[&str], budget: u64) -> (f64, f64) {
    let n = budget.to_string();
    let mut args = vec!["-n", n.as_str()];
    args.extend_from_slice(extra);
    let res = native(bed, board, "tcp", &args);
    let mut rate = 0.0;
    for flow in flows {
        let s = &res["summary"][flow];
        let (tx, rx) = (u(&s["sender"]["total_bytes"]), u(&s["receiver"]["total_bytes"]));
        assert_eq!(s["bytes_match"], true, "{extra:?} {flow}: {s}");
        assert_eq!((tx, rx), (budget, budget), "{extra:?} {flow}: both ends count -n exactly: {s}");
        rate += f(&s["receiver"]["bits_per_second"]);
    }
    let board_bytes: u64 = res["streams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["measured_by"] == "server")
        .map(|r| u(&r["bytes"]))
        .sum();
    assert_eq!(board_bytes, budget * flows.len() as u64, "{extra:?}: the board's own count: {}", res["streams"]);
    let per_byte = instructions(&res, "byte", board_bytes);
    eprintln!("board tcp {extra:?}: {:.1} Mbit/s, {per_byte:.1} instructions per byte", rate / 1e6);
    (rate, per_byte)
}

/// A fresh forward-hook rule in `a` dropping ≈2% of the data datagrams of `port_match PORT`.
fn add_drop_rule(ns: &Netns, port_match: &str) -> Result<(), String> {
    let _ = ns.nft(&["delete", "table", "inet", TABLE]);
    ns.nft(&["add", "table", "inet", TABLE])?;
    ns.nft(&["add", "chain", "inet", TABLE, CHAIN, "{ type filter hook forward priority 0; }"])?;
    let port = PORT.to_string();
    let rule = [
        "add",
        "rule",
        "inet",
        TABLE,
        CHAIN,
        "udp",
        port_match,
        &port,
        "@th,64,32",
        DATA_PREFIX,
        "numgen",
        "random",
        "mod",
        "1000",
        "<",
        "20",
        "counter",
        "drop",
    ];
    ns.nft(&rule).map(|_| ())
}

/// Paced UDP through the drop rule: lost == the rule's counter, sent == received + lost. A run
/// in which datagrams may have been lost elsewhere is tried again, up to five times: the
/// kernel dropped frames at the full TAP queue (counted: then lost ≤ rule + TAP drops), the
/// board found its controller's receive FIFO nearly full (`nic_near_full`: QEMU's LAN9118 may
/// have dropped frames it counts nowhere), or the client's socket dropped some (`-R`).
fn udp_against_nft(bed: &Bed, board: &Board, reverse: bool) {
    let (port_match, flow) = if reverse { ("sport", "down") } else { ("dport", "up") };
    let mut attempts = String::new();
    for attempt in 1..=5 {
        add_drop_rule(&bed.link.a, port_match).unwrap_or_else(|e| panic!("cannot install the nft drop rule: {e}"));
        let socket_drops = bed.link.b.udp_receive_buffer_drops().unwrap_or(0);
        let tap_drops = bed.tap_drops();
        let payload = PAYLOAD.to_string();
        let mut extra = vec!["-t", "5", "-b", LOSS_RATE, "-l", &payload];
        if reverse {
            extra.push("-R");
        }
        let res = native(bed, board, "udp", &extra);
        let s = &res["summary"][flow];
        let (sent, got, lost) = (u(&s["sender"]["packets"]), u(&s["receiver"]["packets"]), u(&s["receiver"]["lost"]));
        let nft = bed.link.a.counted_datagrams(TABLE, CHAIN, PAYLOAD).unwrap_or_else(|e| panic!("{e}"));
        let near_full = res["target"]["counters"]["nic_near_full"].as_u64().unwrap_or(0);
        let client_drops = bed.link.b.udp_receive_buffer_drops().unwrap_or(0) - socket_drops;
        let tap_dropped = bed.tap_drops() - tap_drops;
        let line = format!(
            "board udp {flow} (attempt {attempt}): sent {sent}, received {got}, lost {lost}, nft dropped {nft}, \
             TAP queue drops {tap_dropped}, board FIFO near full {near_full}, client socket drops {client_drops}, \
             load average {}",
            std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').next().unwrap_or("?")
        );
        eprintln!("{line}");
        attempts.push_str(&line);
        attempts.push('\n');
        assert_eq!(sent, got + lost, "({flow}) sent != received + lost\n{s}");
        assert_eq!(s["packets_accounted"], true, "{s}");
        let _ = bed.link.a.nft(&["delete", "table", "inet", TABLE]);
        if tap_dropped > 0 && near_full == 0 && client_drops == 0 {
            // Every loss is on a host counter, some on one that does not tell data from
            // other frames: bounded, not exact.
            assert!(lost >= nft && lost <= nft + tap_dropped, "({flow}) lost {lost}, nft {nft}, TAP {tap_dropped}");
        }
        if (tap_dropped > 0 || near_full > 0 || client_drops > 0) && attempt < 5 {
            continue;
        }
        assert!(nft > 0, "({flow}) the rule dropped nothing: the test proves nothing\n{s}");
        assert_eq!(
            lost,
            nft,
            "({flow}) netchar reports {lost} lost, nft dropped {nft}; every attempt lost frames outside the rule \
             (a host too busy to run QEMU and the client promptly?):\n{attempts}{s}\n{}",
            board.console()
        );
        return;
    }
}

/// Paced full-size datagrams (1472 bytes at 2 Mbit/s, no drop rule), every one accounted for:
/// the board's instructions per datagram received (or sent, with `reverse`).
fn udp_cost(bed: &Bed, board: &Board, reverse: bool) -> f64 {
    let mut extra = vec!["-t", "3", "-b", "2M", "-l", "1472"];
    if reverse {
        extra.push("-R");
    }
    let res = native(bed, board, "udp", &extra);
    let flow = if reverse { "down" } else { "up" };
    let s = &res["summary"][flow];
    let (sent, got, lost) = (u(&s["sender"]["packets"]), u(&s["receiver"]["packets"]), u(&s["receiver"]["lost"]));
    assert_eq!(sent, got + lost, "({flow}) sent != received + lost\n{s}");
    let per = instructions(&res, "datagram", if reverse { sent } else { got });
    eprintln!("board udp {flow} 1472 bytes at 2 Mbit/s: sent {sent}, lost {lost}, {per:.0} instructions per datagram");
    per
}

/// rr over TCP or UDP: every transaction answered, the board read every request byte; its
/// instructions per transaction, the rate and the median round trip.
fn rr_exact(bed: &Bed, board: &Board, udp: bool) -> (f64, f64, f64) {
    let mut extra = vec!["-n", "2000", "-l", "32", "--response", "64"];
    if udp {
        extra.push("--udp");
    }
    let res = native(bed, board, "rr", &extra);
    let rr = &res["summary"]["rr"];
    assert_eq!(u(&rr["transactions"]), 2000, "{extra:?}: {rr}");
    assert_eq!(u(&rr["lost"]), 0, "{rr}");
    let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
    assert_eq!(u(&far["bytes"]), 2000 * 32, "{extra:?}: the board's count: {far}");
    let per = instructions(&res, "transaction", 2000);
    let rate = f(&rr["transactions_per_second"]);
    let p50 = f(&rr["latency_us"]["p50"]);
    eprintln!("board rr {extra:?}: {rate:.0}/s, p50 {p50:.1} us, {per:.0} instructions per transaction");
    (per, rate, p50)
}

#[test]
fn board_boots_and_netchar_measures_it_exactly() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    let (native_image, _) = match images() {
        Ok(i) => i,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let mut board = Board::boot(&bed, &native_image, true);
    assert!(board.booted_in < BOOT_LIMIT);

    // TCP: up, down, both at once, two streams; every byte on both ends.
    let mut up = Vec::new();
    for _ in 0..3 {
        up.push(tcp_exact(&bed, &board, &[], &["up"], 4_000_000));
    }
    let down = tcp_exact(&bed, &board, &["-R"], &["down"], 4_000_000);
    tcp_exact(&bed, &board, &["--bidir"], &["up", "down"], 2_000_000);
    tcp_exact(&bed, &board, &["-P", "2"], &["up"], 3_000_000);

    // UDP paced, both ways: loss equals the firewall's count; then the cost of a datagram.
    udp_against_nft(&bed, &board, false);
    udp_against_nft(&bed, &board, true);
    let mut udp_up = Vec::new();
    for _ in 0..3 {
        udp_up.push(udp_cost(&bed, &board, false));
    }
    let udp_down = udp_cost(&bed, &board, true);

    // Request/response and the eCos echo pattern.
    let mut rr = Vec::new();
    for _ in 0..3 {
        rr.push(rr_exact(&bed, &board, false));
    }
    let rr_udp = rr_exact(&bed, &board, true);
    let res = native(&bed, &board, "echo", &["--pattern", "64x1024,10@1ms"]);
    assert_eq!(u(&res["summary"]["rr"]["transactions"]), 64, "{}", res["summary"]["rr"]);
    let far = res["streams"].as_array().unwrap().iter().find(|s| s["measured_by"] == "server").unwrap();
    assert_eq!(u(&far["bytes"]), 64 * 1024, "{far}");

    // The figures, and how much the instruction counts move from run to run.
    let up_per_byte: Vec<f64> = up.iter().map(|r| r.1).collect();
    let (lo, hi, rel) = spread(&up_per_byte);
    eprintln!(
        "board figures: boot {:?}; tcp up {:.1} Mbit/s, down {:.1} Mbit/s; instructions per byte received \
         {lo:.2}..{hi:.2} (spread {:.1}%), per byte sent {:.2}",
        board.booted_in,
        up.iter().map(|r| r.0).sum::<f64>() / 3e6,
        down.0 / 1e6,
        rel * 100.0,
        down.1
    );
    let (dlo, dhi, drel) = spread(&udp_up);
    eprintln!(
        "board figures: instructions per datagram received {dlo:.0}..{dhi:.0} (spread {:.1}%), sent {udp_down:.0}",
        drel * 100.0
    );
    let rr_per: Vec<f64> = rr.iter().map(|r| r.0).collect();
    let (tlo, thi, trel) = spread(&rr_per);
    eprintln!(
        "board figures: rr tcp {:.0}/s p50 {:.1} us, {tlo:.0}..{thi:.0} instructions per transaction (spread \
         {:.1}%); rr udp {:.0}/s p50 {:.1} us, {:.0} instructions",
        rr.iter().map(|r| r.1).sum::<f64>() / 3.0,
        rr.iter().map(|r| r.2).sum::<f64>() / 3.0,
        trel * 100.0,
        rr_udp.1,
        rr_udp.2,
        rr_udp.0
    );
    let build = res["remote_host"]["kernel"].as_str().unwrap_or("").to_string();
    eprintln!("board build: {build}");
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let measured = [median(&up_per_byte), median(&udp_up), median(&rr_per)];
    match RECORDED.iter().find(|r| r.0 == build) {
        Some(&(_, byte, datagram, transaction)) => {
            for ((what, got), want) in ["per TCP byte", "per datagram", "per rr transaction"]
                .iter()
                .zip(measured)
                .zip([byte, datagram, transaction])
            {
                assert!(
                    (got - want).abs() <= want * RECORDED_TOLERANCE,
                    "instructions {what}: {got:.2}, recorded {want} for {build}: a regression, or record the new figure"
                );
            }
        }
        None => eprintln!("no figures recorded for {build:?}: record {measured:?} in RECORDED"),
    }
    // Instruction counts do not move with the host's load the way times do: a board that
    // needed a quarter more instructions for the same bytes in one run than another would
    // not be measuring instructions.
    assert!(rel < 0.25 && trel < 0.25, "instruction counts spread {rel:.3} (tcp) {trel:.3} (rr)");
    board.assert_healthy();
}

/// The peer roles' image: the netchar nc_test master, netio client and echo/discard clients
/// against it, with the board's own counts on its console.
/// The board's UART as the client's `--console`: QEMU puts UART 0 on a pseudo-terminal, the
/// client reads it as a serial port through a test, and the line the firmware prints with
/// that test's results (its counters over the test, which the board prints before it sends
/// them) must be in the result, word for word, within the test: after its clock started
/// (the board prints it after the data moved) and before the client exited.
#[test]
fn board_uart_lines_land_in_the_client_result_around_a_test() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    let (native_image, _) = match images() {
        Ok(i) => i,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("uart0.log");
    let board = Board::boot_with(&bed, &native_image, true, Some(&log));
    let pty = board.uart_pty();
    let earlier = board.lines(COUNTERS_LINE).len();
    let console = format!("{pty}:115200");
    let started = Instant::now();
    // -t 3: QEMU looks for a reader on its pty once a second and drops what the board
    // prints before it sees one; the board prints its counters line at the test's end.
    let doc = native(&bed, &board, "tcp", &["-t", "3", "--console", &console]);
    let wall = started.elapsed().as_secs_f64();
    let printed = board.wait_line(COUNTERS_LINE, earlier, Duration::from_secs(5));
    let c = &doc["console"];
    assert_eq!(c["source"], format!("serial {pty} 115200"), "{c}");
    let lines = c["lines"].as_array().unwrap_or_else(|| panic!("no console lines: {c}"));
    let got = lines
        .iter()
        .find(|l| l["text"] == printed.as_str())
        .unwrap_or_else(|| panic!("the board's line {printed:?} is not in the result's console: {c}"));
    let t = f(&got["t"]);
    eprintln!("console of a board test ({wall:.3} s): {}", serde_json::to_string_pretty(lines).unwrap_or_default());
    assert!((0.0..=wall).contains(&t), "t {t} not within the test [0, {wall}]: {got}");
    // The line names the same counters the result's target has.
    check_target(&doc, &console_counters(got["text"].as_str().unwrap()));
    assert_eq!(c["dropped"], 0, "{c}");
    assert!(c.get("ended").is_none(), "the pty stayed open: {c}");
}

#[test]
fn board_peer_roles_serve_nc_test_netio_and_echo() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    let (_, peers_image) = match images() {
        Ok(i) => i,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let mut board = Board::boot(&bed, &peers_image, true);

    // The eCos suite (its short form), the netchar master against the board's slave: every
    // section runs, the slave-load one on the board's background load (SET_LOAD 0, then 50%),
    // the master-load one on its idle loop's counter; the slave counts every buffer of each
    // echo test, and says what share of its loop the 50% load ran.
    let nc = NC_TEST_PORT.to_string();
    let earlier = board.lines("background load of").len();
    let res = netchar(&bed, &board, &["suite", "ecos", BOARD_IP, "--proto", "nc-test", "-p", &nc, "--quick"]);
    let tests = res.as_array().expect("one result per test of the suite");
    // TCP echo 64 x 10240; UDP and TCP echo at loads 0 and 50%; the same twice with idle.
    assert_eq!(tests.len(), 9, "every section ran: {res}");
    let line = board.wait_line("background load of", earlier, Duration::from_secs(5));
    let ran = load_ran(&line, 50);
    eprintln!("board nc_test: {line}");
    assert!((ran - 50.0).abs() <= 2.0, "asked 50%, the board ran {ran}%: {line}");
    for t in tests {
        assert!(t["error"].is_null(), "{}: {}\n{}", t["test"]["title"], t["error"], board.console());
    }
    for line in board.lines("nc-test UDP echo").iter().chain(board.lines("nc-test TCP echo").iter()) {
        let n: Vec<u64> = line.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
        // "... from A.B.C.D:P: sent S buffers, received R buffers (I bytes in, O bytes out), T timeouts"
        let tail = &n[n.len() - 5..];
        assert_eq!(tail[0], tail[1], "as many buffers sent as received: {line}");
        assert_eq!(tail[2], tail[3], "as many bytes back as came: {line}");
        assert_eq!(tail[4], 0, "{line}");
    }
    assert!(!board.lines("nc-test UDP echo").is_empty() && !board.lines("nc-test TCP echo").is_empty());
    let idle = board.lines("nc-test").len();
    eprintln!("board nc_test: {} tests, {idle} slave log lines", tests.len());

    // SET_LOAD asked against measured twice over: the share the board says each level ran
    // (its clock), and the idle-loop counts per tick it leaves (START/STOP_IDLE), against those
    // at no load, as eCos's slave calibrates its load.
    let earlier = board.lines("background load of").len();
    let out = run_role(&bed, &board, "load_role", &[("NETCHAR_BOARD", BOARD_IP.to_string())]);
    let per_tick: Vec<f64> = LOADS
        .iter()
        .map(|load| {
            // "load L: ticks T count C" (the first after the harness's "test load_role ... ").
            let tag = format!("load {load}: ");
            let line = out.lines().find_map(|l| l.split(&tag).nth(1)).unwrap_or_else(|| panic!("no {tag:?}: {out}"));
            let n: Vec<f64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
            assert_eq!(n.len(), 2, "{line}");
            n[1] / n[0]
        })
        .collect();
    let mut figures = Vec::new();
    for (i, &load) in LOADS.iter().enumerate().skip(1) {
        let line = board.wait_line("background load of", earlier + i - 1, Duration::from_secs(5));
        let ran = load_ran(&line, load);
        let by_idle = 100.0 * (1.0 - per_tick[i] / per_tick[0]);
        figures.push(format!("{load}%: ran {ran}%, idle counts say {by_idle:.1}%"));
        assert!((ran - f64::from(load)).abs() <= 2.0, "asked {load}%, the board ran {ran}%: {line}");
        assert!(
            (by_idle - f64::from(load)).abs() <= 5.0,
            "asked {load}%, the idle counts per tick fell by {by_idle:.1}% ({per_tick:?})\n{out}"
        );
    }
    eprintln!("board background load: {}", figures.join("; "));

    // netio's TCP test with 4k blocks: the board read every byte the client sent (and the end
    // marker), the client every byte the board sent.
    let netio = NETIO_PORT.to_string();
    let res = netchar(
        &bed,
        &board,
        &["suite", "netio", BOARD_IP, "--proto", "netio", "-p", &netio, "-b", "4k", "--netio-interval", "2"],
    );
    let res = &res.as_array().unwrap()[0];
    assert!(res["error"].is_null(), "{}", res["error"]);
    let rec = |flow: &str, role: &str| {
        let s = res["streams"].as_array().unwrap().iter().find(|s| s["flow"] == flow && s["role"] == role).unwrap();
        u(&s["bytes"])
    };
    let (tx, rx) = (rec("up", "sender"), rec("down", "receiver"));
    // The numbers after the line's "FROM:PORT: ".
    let numbers = |line: String| -> Vec<u64> {
        let text = line.rsplit(": ").next().unwrap_or("").to_string();
        text.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect()
    };
    let received = board.wait_line("bytes in 4096-byte blocks", 0, Duration::from_secs(5));
    let sent = board.wait_line("bytes in 4096-byte blocks", 1, Duration::from_secs(5));
    assert!(received.contains("received") && sent.contains("sent"), "{received}\n{sent}");
    assert_eq!(numbers(received)[..2], [tx + 4096, 4096]);
    assert_eq!(numbers(sent)[..2], [rx, 4096]);
    eprintln!("board netio: client sent {tx}, received {rx} bytes in 4 KiB blocks");

    // Echo over TCP: every byte back; discard over TCP: the board's count is the client's.
    let echo = ECHO_PORT.to_string();
    let res = netchar(&bed, &board, &["tcp", BOARD_IP, "--proto", "echo", "-p", &echo, "-n", "300000"]);
    assert!(res["error"].is_null(), "{}", res["error"]);
    let line = board.wait_line("echo tcp from", 0, Duration::from_secs(5));
    // With netchar's 40-byte hello, which the client sends first and takes back off.
    assert!(line.ends_with(": 300040 bytes in, 300040 bytes out"), "{line}");
    let res = netchar(&bed, &board, &["tcp", BOARD_IP, "--proto", "discard", "-p", "9", "-n", "1000000"]);
    assert!(res["error"].is_null(), "{}", res["error"]);
    let line = board.wait_line("discard tcp from", 0, Duration::from_secs(5));
    assert!(line.ends_with(": 1000000 bytes"), "{line}");
    // Echo over UDP at 1 Mbit/s: every datagram accounted for, the board's bytes out its bytes in.
    let res = netchar(&bed, &board, &["udp", BOARD_IP, "--proto", "echo", "-p", &echo, "-t", "2", "-b", "1M"]);
    assert!(res["error"].is_null(), "{}", res["error"]);
    let line = board.wait_line("echo udp from", 0, Duration::from_secs(5));
    let n = numbers(line.clone());
    assert_eq!(n[1], n[2], "UDP echo returns what came: {line}");
    board.assert_healthy();
}

/// The share "background load of PCT% ran X.Y% of the time for N ms" says the load ran.
fn load_ran(line: &str, pct: u32) -> f64 {
    let rest = line
        .split(&format!("background load of {pct}% ran "))
        .nth(1)
        .unwrap_or_else(|| panic!("not the {pct}% load's line: {line}"));
    rest.split('%').next().unwrap().parse().unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// The loads the load test asks for, in percent.
const LOADS: [u32; 4] = [0, 25, 50, 75];

/// Runs in `b` when a test starts it: nc_test's SET_LOAD at each of LOADS against the peer
/// image at NETCHAR_BOARD, and at each the idle loop's count over 3 s (START_IDLE, STOP_IDLE),
/// printed as "load L: ticks T count C"; then DISCONNECT, which stops the load.
#[test]
#[ignore = "a role of netns_board, started by it inside a namespace"]
fn load_role() {
    let Ok(board) = std::env::var("NETCHAR_BOARD") else { return };
    let to = SocketAddr::new(board.parse().unwrap(), NC_TEST_PORT);
    let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut seq = 1000;
    let mut ask = |kind: Kind, nbufs: u32| -> Reply {
        seq += 1;
        sock.send_to(&Request::new(kind, seq, nbufs, 0).encode(), to).unwrap();
        let mut buf = [0u8; 64];
        let (n, _) = sock.recv_from(&mut buf).expect("a reply");
        let reply = Reply::decode(&buf[..n]).unwrap();
        assert!(reply.is_ack() && reply.seq == seq, "{kind:?} {nbufs}: {reply:?}");
        reply
    };
    for load in LOADS {
        ask(Kind::SetLoad, load);
        thread::sleep(Duration::from_millis(300));
        ask(Kind::StartIdle, 0);
        thread::sleep(Duration::from_secs(3));
        let r = ask(Kind::StopIdle, 0);
        println!("load {load}: ticks {} count {}", r.elapsed_ticks, r.idle_count());
    }
    ask(Kind::Disconnect, 0);
}

/// Runs in `b` when a test starts it: the hostile input of crates/cli/tests/responder.rs and
/// the fuzzing seeds (responder/fuzz/seeds) against the board at NETCHAR_BOARD, then a good
/// test (NETCHAR_BIN) while more silent connections than the board has slots stay open.
#[test]
#[ignore = "a role of netns_board, started by it inside a namespace"]
fn hostile_role() {
    let Ok(board) = std::env::var("NETCHAR_BOARD") else { return };
    let seeds = PathBuf::from(std::env::var("NETCHAR_SEEDS").unwrap());
    let to = SocketAddr::new(board.parse().unwrap(), PORT);
    let connect = || {
        let s = TcpStream::connect_timeout(&to, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        s
    };
    let hello = |s: &mut TcpStream| {
        let mut h = [0u8; 40];
        h[..8].copy_from_slice(b"netchar\0");
        h[9] = 2;
        s.write_all(&h).unwrap();
        let mut answer = [0u8; 40];
        s.read_exact(&mut answer).unwrap();
        assert_eq!(&answer[..8], b"netchar\0", "a server hello");
    };
    let read_to_close = |mut s: TcpStream| -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
                Err(e) => panic!("the board kept a hostile connection open: {e}"),
            }
        }
    };
    let frame = |payload: &[u8]| {
        let mut f = (payload.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(payload);
        f
    };
    let mut cases = 0;
    // A garbage hello: closed without an answer.
    let mut s = connect();
    s.write_all(&[b'x'; 40]).unwrap();
    assert!(read_to_close(s).is_empty(), "a garbage hello was answered");
    // An oversized frame: the length alone ends the session.
    let mut s = connect();
    hello(&mut s);
    s.write_all(&0x7fff_ffffu32.to_be_bytes()).unwrap();
    assert!(String::from_utf8_lossy(&read_to_close(s)).contains("larger"));
    // Truncated JSON, then the client closes.
    let mut s = connect();
    hello(&mut s);
    let mut f = frame(br#"{"type":"request","spec":{"kind":"tcp","direction":"up","streams":1}}"#);
    f.truncate(30);
    s.write_all(&f).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    read_to_close(s);
    cases += 3;
    // Malformed or hostile frames: each gets an error and a close.
    let deep = "[".repeat(5000);
    let huge_number = format!(r#"{{"type":"sender_done","totals":[{{"id":1,"bytes":{}}}]}}"#, "9".repeat(900));
    let many_totals = format!(r#"{{"type":"sender_done","totals":[{}]}}"#, vec![r#"{"id":1}"#; 100].join(","));
    for bad in [
        &br#"{"type":"request","spec":{"kind":"tcp""#[..],
        br#"{"type":"launch"}"#,
        br#"{"type":"request","spec":{"kind":"tcp","direction":"up"}}"#,
        br#"{"type":"request","spec":{"kind":"tcp","direction":"up","streams":-1,"end":{"seconds":1},"block_bytes":1}}"#,
        br#"{"type":"start"}"#,
        br#"{"type":"start"} trailing"#,
        b"\"\\u12\"",
        b"\xff\xfe{}",
        deep.as_bytes(),
        huge_number.as_bytes(),
        many_totals.as_bytes(),
        b"",
    ] {
        let mut s = connect();
        hello(&mut s);
        s.write_all(&frame(bad)).unwrap();
        let got = read_to_close(s);
        assert!(String::from_utf8_lossy(&got).contains("\"type\":\"error\""), "{:?}", String::from_utf8_lossy(bad));
        cases += 1;
    }
    // The fuzzing seeds (captured client messages), whole and mutated: cut in half, a byte
    // flipped at a third and at two thirds; whatever the board makes of each, it closes the
    // session when the client does.
    let mut names: Vec<PathBuf> = std::fs::read_dir(&seeds).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in names.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let seed = std::fs::read(path).unwrap();
        let mut variants = vec![seed.clone(), seed[..seed.len() / 2].to_vec()];
        for at in [seed.len() / 3, 2 * seed.len() / 3] {
            let mut v = seed.clone();
            v[at] ^= 0x5a;
            variants.push(v);
        }
        for v in variants {
            let mut s = connect();
            hello(&mut s);
            s.write_all(&frame(&v)).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            read_to_close(s);
            cases += 1;
        }
    }
    // Stray datagrams on the UDP port: garbage, a truncated header, a setup for no test, and
    // the binary seeds.
    let u = UdpSocket::bind("0.0.0.0:0").unwrap();
    let mut setup = vec![0u8; 64];
    setup[..4].copy_from_slice(&[0x4e, 0x43, 1, 5]);
    setup[7] = 1;
    let mut datagrams =
        vec![b"garbage".to_vec(), vec![0x4e, 0x43, 1, 1, 0, 0], vec![0x4e, 0x43, 1, 1, 0, 0, 0, 1], setup];
    for path in names.iter().filter(|p| p.extension().is_some_and(|e| e == "bin")) {
        datagrams.push(std::fs::read(path).unwrap());
    }
    for d in &datagrams {
        u.send_to(d, to).unwrap();
        cases += 1;
    }
    // More silent connections than the board has slots (NC_MAX_CONNS 6): the oldest silent
    // ones give way, and a test still runs, exact.
    let silent: Vec<TcpStream> = (0..12).map(|_| connect()).collect();
    let out = Command::new(std::env::var("NETCHAR_BIN").unwrap())
        .args(["tcp", &board, "-p", &PORT.to_string(), "-n", "1000000", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "the test after the hostile input failed: {}", String::from_utf8_lossy(&out.stderr));
    let res: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(res["summary"]["up"]["receiver"]["total_bytes"], 1_000_000, "{}", res["summary"]);
    drop(silent);
    println!("hostile cases sent: {cases}");
}

/// Runs in `b` when a test starts it: the reflection guard's rules on the peer roles' board at
/// NETCHAR_BOARD, sent from `b`'s address inside the allowed networks (NETCHAR_INSIDE) and
/// from one outside (NETCHAR_OUTSIDE). Prints what it measured.
#[test]
#[ignore = "a role of netns_board, started by it inside a namespace"]
fn guard_role() {
    let Ok(board) = std::env::var("NETCHAR_BOARD") else { return };
    let board: Ipv4Addr = board.parse().unwrap();
    let inside: Ipv4Addr = std::env::var("NETCHAR_INSIDE").unwrap().parse().unwrap();
    let outside: Ipv4Addr = std::env::var("NETCHAR_OUTSIDE").unwrap().parse().unwrap();
    let echo = SocketAddr::new(board.into(), ECHO_PORT);
    let answer = |s: &UdpSocket, wait: Duration| -> Option<Vec<u8>> {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut buf = [0u8; 2048];
        s.recv_from(&mut buf).ok().map(|(n, _)| buf[..n].to_vec())
    };
    let ping = b"are you a loop?";
    // Rule 1: from a service port (999) and from one of the board's own port numbers (its
    // nc_test control port) echo answers nothing; from an ephemeral port it answers.
    for sport in [999, NC_TEST_PORT] {
        let s = UdpSocket::bind((inside, sport)).unwrap();
        s.send_to(ping, echo).unwrap();
        assert_eq!(answer(&s, Duration::from_millis(700)), None, "echo answered a datagram from port {sport}");
    }
    let s = UdpSocket::bind((inside, 0)).unwrap();
    s.send_to(ping, echo).unwrap();
    assert_eq!(answer(&s, Duration::from_secs(5)).as_deref(), Some(&ping[..]), "echo answers a client");

    // Rule 2: UDP_SEND from outside the allowed networks: five NAKs (reason 2), no data; from
    // inside: the test runs and its datagrams come.
    let five = |from: Ipv4Addr| -> (Vec<Reply>, u64, u64, u64) {
        let ctrl = UdpSocket::bind((from, 0)).unwrap();
        let data = UdpSocket::bind((from, 0)).unwrap();
        let (mut replies, mut sent, mut received, mut datagrams) = (Vec::new(), 0, 0, 0);
        for seq in 2..7 {
            let mut req = Request::new(Kind::UdpSend, seq, 100, 1024);
            req.slave_port = u32::from(NC_TEST_DATA_PORT);
            req.master_port = u32::from(data.local_addr().unwrap().port());
            let bytes = req.encode();
            ctrl.send_to(&bytes, (board, NC_TEST_PORT)).unwrap();
            sent += bytes.len() as u64;
            let reply = answer(&ctrl, Duration::from_secs(5)).expect("a reply to each request");
            received += reply.len() as u64;
            let reply = Reply::decode(&reply).unwrap();
            assert_eq!(reply.seq, seq);
            replies.push(reply);
            while let Some(d) = answer(&data, Duration::from_secs(1)) {
                received += d.len() as u64;
                if d.len() == RESULTS_LEN && Results::decode(&d).is_ok() {
                    break;
                }
                datagrams += 1;
            }
        }
        (replies, sent, received, datagrams)
    };
    let (replies, sent, received, datagrams) = five(outside);
    for r in &replies {
        assert!(!r.is_ack() && r.reason == NAK_BAD_REQUEST, "a NAK, reason 2: {r:?}");
    }
    assert_eq!(datagrams, 0, "no test datagram follows a NAK");
    assert_eq!(received, 5 * REPLY_LEN as u64);
    assert!(received <= sent);
    let (replies, _, _, datagrams) = five(inside);
    assert!(replies.iter().all(Reply::is_ack), "{replies:?}");
    assert_eq!(datagrams, 5 * 100, "every test datagram arrived from the board");

    // Rule 3: UDP echo to an address outside the allowed networks at 2 MB/s for 2 s: back at
    // most what was sent, and at most the budget.
    let sock = UdpSocket::bind((outside, 0)).unwrap();
    sock.connect(echo).unwrap();
    let reader = sock.try_clone().unwrap();
    let back = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut bytes = 0u64;
        reader.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
        while let Ok(n) = reader.recv(&mut buf) {
            bytes += n as u64;
        }
        (bytes, Instant::now())
    });
    let (datagram, rate, secs) = ([0x5au8; 1000], 2_000_000.0, 2.0);
    let start = Instant::now();
    let mut flood = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let due = start + Duration::from_secs_f64(flood as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        if sock.send(&datagram).is_ok() {
            flood += datagram.len() as u64;
        }
    }
    let (got, last) = back.join().unwrap();
    let window = (last.duration_since(start).as_secs_f64() - 0.7).max(secs);
    let budget = ANSWER_RATE * window + ANSWER_BURST;
    assert!(got <= flood, "more bytes back ({got}) than sent ({flood})");
    assert!(got as f64 <= budget, "{got} bytes back in {window:.2} s exceed the budget ({budget:.0})");
    println!("echo outside the allowed networks: sent {flood} bytes in {secs} s, {got} came back (budget {budget:.0})");
}

/// Runs a role of this test binary in `b`; its stdout, after checking it passed.
fn run_role(bed: &Bed, board: &Board, role: &str, env: &[(&str, String)]) -> String {
    let mut cmd = bed.link.b.command(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", role, "--test-threads", "1", "--nocapture"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = netns::run_with_timeout(cmd, Duration::from_secs(300)).unwrap();
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{role} failed:\n{}\n{}\nboard console:\n{}",
        run.stdout,
        run.stderr,
        board.console()
    );
    run.stdout
}

/// The hostile corpus the hosted responder survives, over the TAP against the board: no hang,
/// no reset, the next good test exact; then the reflection guard's rules on the peer roles'
/// board.
#[test]
fn board_survives_hostile_input_and_keeps_its_reflection_guard() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    let (native_image, peers_image) = match images() {
        Ok(i) => i,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    {
        let mut board = Board::boot(&bed, &native_image, true);
        let env = [
            ("NETCHAR_BOARD", BOARD_IP.to_string()),
            ("NETCHAR_SEEDS", responder_dir().join("fuzz/seeds").display().to_string()),
            ("NETCHAR_BIN", NETCHAR.to_string()),
        ];
        let out = run_role(&bed, &board, "hostile_role", &env);
        eprintln!("board hostile input: {}", out.lines().find(|l| l.contains("hostile cases")).unwrap_or(""));
        board.assert_healthy();
        // The next test after it all, with both ends' counts.
        tcp_exact(&bed, &board, &[], &["up"], 2_000_000);
        udp_against_nft(&bed, &board, false);
        board.assert_healthy();
    }
    // The answer budget is bytes per second of the board's clock: without -icount, that is
    // the host's (under -icount a board that fell behind catches up faster than real time,
    // and the host cannot tell how far its clock ran).
    let mut board = Board::boot(&bed, &peers_image, false);
    let env = [
        ("NETCHAR_BOARD", BOARD_IP.to_string()),
        ("NETCHAR_INSIDE", bed.link.b_ip.to_string()),
        ("NETCHAR_OUTSIDE", bed.outside.to_string()),
    ];
    let out = run_role(&bed, &board, "guard_role", &env);
    eprintln!("board guard: {}", out.lines().find(|l| l.contains("echo outside")).unwrap_or(""));
    // The board's own account: the refusal logged once with the setting that lifts it, the
    // answers held back, and its counters (datagrams from a service port and from its own).
    let o = bed.outside;
    assert_eq!(
        board.lines(&format!("UDP_SEND to {o} refused")),
        [format!(
            "netchar-responder: nc_test UDP_SEND to {o} refused: not in NC_ALLOW_PEERS (add NC_ALLOW_PEERS {o}/32)"
        )]
    );
    assert_eq!(board.lines(&format!("echo: answers to {o} held back")).len(), 1, "{}", board.console());
    let counters = board.wait_line(
        "reflection guard: dropped 1 datagrams from service ports and 1 from",
        0,
        Duration::from_secs(15),
    );
    assert!(counters.contains("refused 5 unprompted tests"), "{counters}");
    // The nc_test slave still serves a master from the allowed networks.
    let nc = NC_TEST_PORT.to_string();
    let res =
        netchar(&bed, &board, &["echo", BOARD_IP, "--proto", "nc-test", "-p", &nc, "--udp", "--pattern", "100x1024"]);
    let res = &res.as_array().map_or(&res, |a| &a[0]).clone();
    assert_eq!(u(&res["summary"]["rr"]["transactions"]), 100, "{}", res["summary"]);
    board.assert_healthy();
}

/// IPv6 on the TAP link (`BOARD_IP6`, an implied /64, beside the link-local address): the
/// native image answers ping on it, the native protocol measures TCP (both ends' counts
/// exact, IPv6's counters in the result's `target`) and UDP rr over it; the peer image's
/// nc_test slave serves a UDP and a TCP echo test over it, each counted by the board. The
/// client runs in `a`, on the link: lwIP learns routers only from advertisements, and this
/// link has none.
#[test]
fn board_serves_ipv6_on_the_tap_link() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    let (native_image, peers_image) = match images() {
        Ok(i) => i,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    bed.enable_ipv6().expect("IPv6 on the TAP");
    let a = &bed.link.a;
    {
        let mut board = Board::boot(&bed, &native_image, true);
        assert!(board.line(READY).contains(&format!("{BOARD_IP6}/64 and fe80:")), "{}", board.line(READY));
        let ping = a.command("ping").args(["-6", "-c", "3", "-W", "2", BOARD_IP6]).output().expect("run ping");
        assert!(ping.status.success(), "ping {BOARD_IP6}: {}", String::from_utf8_lossy(&ping.stdout));
        let res = native_at(a, BOARD_IP6, &board, "tcp", &["-n", "2000000"]);
        for s in res["streams"].as_array().unwrap() {
            assert_eq!(u(&s["bytes"]), 2_000_000, "{s}");
        }
        let moved = |name: &str| res["target"]["counters"][name].as_u64().unwrap_or(0);
        assert!(moved("ip6_recv") > 0 && moved("ip6_xmit") > 0, "{}", res["target"]);
        assert_eq!(moved("ip_recv"), 0, "an IPv6 test moved IPv4's counters: {}", res["target"]);
        let per = instructions(&res, "byte", 2_000_000);
        let res = native_at(a, BOARD_IP6, &board, "rr", &["-n", "1000", "--udp"]);
        assert_eq!(u(&res["summary"]["rr"]["transactions"]), 1000, "{}", res["summary"]);
        assert_eq!(u(&res["summary"]["rr"]["lost"]), 0, "{}", res["summary"]);
        eprintln!(
            "board over IPv6: tcp up {per:.2} instructions per byte; udp rr {:.0}/s, p50 {:.1} us",
            f(&res["summary"]["rr"]["transactions_per_second"]),
            f(&res["summary"]["rr"]["latency_us"]["p50"])
        );
        board.assert_healthy();
    }
    let mut board = Board::boot(&bed, &peers_image, true);
    let nc = NC_TEST_PORT.to_string();
    for (udp, pattern, what) in [(true, "100x1024", "nc-test UDP echo"), (false, "50x1024", "nc-test TCP echo")] {
        let mut args = vec!["echo", BOARD_IP6, "--proto", "nc-test", "-p", &nc, "--pattern", pattern];
        if udp {
            args.push("--udp");
        }
        let res = netchar_in(a, &board, &args);
        let res = res.as_array().map_or(&res, |all| &all[0]).clone();
        assert!(res["error"].is_null(), "{}", res["error"]);
        let n: u64 = pattern.split('x').next().unwrap().parse().unwrap();
        assert_eq!(u(&res["summary"]["rr"]["transactions"]), n, "{}", res["summary"]);
        let line = board.wait_line(&format!("{what} from [fd00:77:0:0:0:0:0:1]:"), 0, Duration::from_secs(5));
        assert!(line.contains(&format!(": sent {n} buffers, received {n} buffers")), "{line}");
    }
    board.assert_healthy();
}

/// The build variables are dependencies of the image: the native image built in a scratch
/// build directory with one BOARD_IP, then another, carries the second (as text, and on its
/// console when it boots) and serves there, with only the responder's and the board's objects
/// rebuilt; the same value again rebuilds nothing.
#[test]
fn board_image_follows_a_changed_board_ip() {
    let _one = ONE_BOARD.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(reason) = images() {
        return netns::skip_or_fail(&reason);
    }
    let bed = match Bed::create() {
        Ok(b) => b,
        Err(reason) => return netns::skip_or_fail(&reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("board/netchar-board.elf");
    let lwip = responder_dir().join("build/lwip");
    let build = |ip: &str| -> String {
        let out = Command::new("make")
            .arg("-C")
            .arg(responder_dir())
            .arg("-j2")
            .arg(format!("BUILD={}", dir.path().display()))
            .arg(format!("LWIP_SRC={}", lwip.display()))
            .arg(format!("BOARD_IP={ip}"))
            .arg(&elf)
            .output()
            .expect("run make");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "make BOARD_IP={ip} failed:\n{text}");
        text
    };
    build("10.77.0.9");
    let second = build("10.77.0.3");
    assert!(second.contains("ARM-CC src/nc_responder.c") && second.contains("LINK"), "{second}");
    assert!(!second.contains("ARM-CC (lwIP)"), "lwIP rebuilt for a new BOARD_IP:\n{second}");
    let image = std::fs::read(&elf).unwrap();
    let has = |s: &str| image.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(has("10.77.0.3") && !has("10.77.0.9"), "the image does not carry the second BOARD_IP");
    let third = build("10.77.0.3");
    assert!(!third.contains("ARM-CC") && !third.contains("LINK"), "the same value rebuilt:\n{third}");
    let mut board = Board::boot(&bed, &elf, true);
    assert!(board.line(READY).contains("mps2-an386, 10.77.0.3/24,"), "{}", board.line(READY));
    let res = native_at(&bed.link.b, "10.77.0.3", &board, "rr", &["-n", "200"]);
    assert_eq!(u(&res["summary"]["rr"]["transactions"]), 200, "{}", res["summary"]);
    board.assert_healthy();
}
