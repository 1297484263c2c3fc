//! Pointed at the wrong kind of server, every pairing ends in one line that names what
//! answered and the flag that talks to it: netchar's client with the default protocol or the
//! wrong `--proto` against each peer server the installed tools allow (iperf3, iperf 2,
//! netperf's netserver) and against netchar's own server and listeners (native, echo,
//! discard, chargen, netio, nc_test); the clients of the protocols without a hello (iperf2,
//! echo, discard, chargen) against a netchar server, an iperf3 server, netserver and a netio
//! server, judged by what the peer sent back and when it closed; and each peer client (iperf3,
//! iperf, netperf, irtt) against `netchar server`'s own port, whose log names the client and
//! the listener that answers it. The recognition itself is crates/wire/src/hello.rs (`identify_peer` for
//! servers, `identify_client` for clients); this runs it against the real tools.
//!
//! Each case is one run with its exit code and its one error line. Slow cases are the silent
//! servers: netchar waits 5 s for a hello and 10 s for iperf3's PARAM_EXCHANGE before it
//! says what stayed silent.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use netchar_testkit::ports::free_tcp_port as free_port;

/// Waits until something listens on `port` (TCP) or has bound it (UDP), as /proc says (a probe
/// connection would be a client of its own to the server under test), while `child` runs. False
/// when `child` exited first: it could not bind the port.
fn wait_bound(child: &mut Child, port: u16, udp: bool) -> bool {
    let (table, state) = if udp { ("/proc/net/udp", "07") } else { ("/proc/net/tcp", "0A") };
    let hex = format!(":{port:04X} ");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        let text = std::fs::read_to_string(table).unwrap_or_default();
        if text.lines().any(|l| l.contains(&hex) && l.split_whitespace().nth(3) == Some(state)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing bound port {port} within 10 s");
}

/// A peer tool's server on a free loopback port; killed on drop.
struct PeerServer {
    child: Child,
    port: u16,
}

impl PeerServer {
    /// `program ARGS` with `{port}` in ARGS replaced, or None (said why) when the tool is
    /// missing.
    fn start(program: &str, args: &[&str], udp: bool, install: &str) -> Option<Self> {
        if !require::tool(&format!("wrong-server cases against {program}"), program, &["-h"], install) {
            return None;
        }
        // A port free when asked can be taken before the server binds it (another process's
        // client, say); the server then exits, and the next port is tried.
        for _ in 0..5 {
            let port = free_port();
            let args: Vec<String> = args.iter().map(|a| a.replace("{port}", &port.to_string())).collect();
            let mut child = Command::new(program)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
            if wait_bound(&mut child, port, udp) {
                return Some(Self { child, port });
            }
        }
        panic!("{program} exited before listening, on 5 free ports in turn");
    }
}

impl Drop for PeerServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One run of netchar's client: `args` with `{port}` replaced; it must exit 2 with exactly one
/// error line, which is returned.
fn one_error_line(port: u16, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.replace("{port}", &port.to_string())).collect();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = netchar(&argv);
    let errors: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("netchar: error:")).collect();
    assert_eq!(run.code, 2, "netchar {args:?}: exit {}, expected 2\n{}", run.code, run.stderr);
    assert_eq!(errors.len(), 1, "netchar {args:?}: one error line expected\n{}", run.stderr);
    errors[0].to_string()
}

/// [`one_error_line`], and that line must contain each of `expect`.
fn assert_one_line(port: u16, args: &[&str], expect: &[&str]) {
    let line = one_error_line(port, args);
    for e in expect {
        assert!(line.contains(e), "netchar {args:?}: {line:?} lacks {e:?}");
    }
}

/// Runs each case on a thread of its own and waits for all of them; a case's panic is the
/// test's, with its own message. The cases that meet a silent peer wait out netchar's 5 s hello
/// (or 10 s PARAM_EXCHANGE) timeout, and a process waiting costs the machine nothing: side by
/// side, a test takes its slowest case's time instead of the sum. Each case starts its own
/// server, so none sees another's connections.
fn side_by_side<'a>(cases: Vec<Box<dyn FnOnce() + Send + 'a>>) {
    std::thread::scope(|scope| {
        let running: Vec<_> = cases.into_iter().map(|case| scope.spawn(case)).collect();
        for case in running {
            if let Err(panic) = case.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

const SILENT: &str = "said nothing, as an iperf2 server (--proto iperf2), netperf's netserver (--proto netperf), \
                      a netio server (suite netio --proto netio) or a discard service (--proto discard) does";

#[test]
fn netchar_against_an_iperf3_server() {
    let Some(s) =
        PeerServer::start("iperf3", &["-s", "-B", "127.0.0.1", "-p", "{port}"], false, "apt-get install iperf3")
    else {
        return;
    };
    // rr cannot run over iperf3: the found server is named with the reason.
    assert_one_line(s.port, &["rr", "127.0.0.1", "-p", "{port}", "-t", "1"], &["iperf3"]);
    assert_one_line(
        s.port,
        &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "netperf"],
        &["not a netserver: an iperf3 server answered (PARAM_EXCHANGE); add --proto iperf3"],
    );
}

#[test]
fn netchar_against_an_iperf2_server() {
    let Some(s) =
        PeerServer::start("iperf", &["-s", "-B", "127.0.0.1", "-p", "{port}"], false, "apt-get install iperf")
    else {
        return;
    };
    assert_one_line(s.port, &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1"], &["no netchar hello within 5 s", SILENT]);
    // iperf 2.1 takes iperf3's cookie for a header with a bad permit key and closes, when its
    // own wait for the rest of the header ends (8.1 s here). netchar waits 10 s for
    // PARAM_EXCHANGE: on a busy machine the close can come after that, and then netchar rightly
    // says the server was silent. Which one happened is read from how long netchar waited;
    // either way the line names iperf2 and its flag.
    let began = Instant::now();
    let line = one_error_line(s.port, &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "iperf3"]);
    let waited = began.elapsed();
    let expect: &[&str] = if waited >= Duration::from_secs(10) && line.contains("timed out after 10 s") {
        &["the server said nothing, as an iperf2 server (--proto iperf2)"]
    } else {
        &["not an iperf3 server", "--proto iperf2"]
    };
    for e in expect {
        assert!(line.contains(e), "after {waited:?}: {line:?} lacks {e:?}");
    }
}

#[test]
fn netchar_against_netperfs_netserver() {
    let netserver =
        || PeerServer::start("netserver", &["-D", "-L", "127.0.0.1", "-p", "{port}"], false, "apt-get install netperf");
    side_by_side(vec![
        Box::new(|| {
            let Some(s) = netserver() else { return };
            assert_one_line(
                s.port,
                &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1"],
                &["no netchar hello within 5 s", SILENT],
            );
        }),
        Box::new(|| {
            let Some(s) = netserver() else { return };
            assert_one_line(
                s.port,
                &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "iperf3"],
                &["waiting for the iperf3 server to ask for the test's parameters: the server", SILENT],
            );
        }),
    ]);
}

#[test]
fn peer_protocols_against_netchars_own_server() {
    let s = Server::start(&[]);
    let native = "a netchar server answered (its hello): netchar's own protocol, which runs without --proto";
    for (args, expect) in [
        (vec!["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "iperf3"], "not an iperf3 server: "),
        (vec!["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "netperf"], "not a netserver: "),
        (vec!["rr", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", "netperf"], "not a netserver: "),
    ] {
        assert_one_line(s.port, &args, &[expect, native]);
    }
    // Without its nc_test listener, the suite's master hears nothing on UDP and names the flag.
    assert_one_line(
        s.port,
        &["suite", "ecos", "127.0.0.1", "-p", "{port}", "--proto", "nc-test"],
        &["no nc_test slave answered", "netchar server --nc-test"],
    );
}

/// netchar's own echo, discard, chargen, netio and nc_test listeners stand in for those
/// services (no stock one is installed here); each answers as the stock service does.
#[test]
fn netchar_against_echo_discard_chargen_netio_and_nc_test_servers() {
    let s = Server::start(&[
        "--services",
        "--echo-port",
        "0",
        "--discard-port",
        "0",
        "--chargen-port",
        "0",
        "--netio",
        "--netio-port",
        "0",
        "--nc-test",
        "--nc-test-port",
        "0",
        "--nc-test-data-port",
        "0",
    ]);
    let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(2))].concat();
    let services = lines.iter().find(|l| l.starts_with("services: ")).unwrap_or_else(|| panic!("{lines:?}"));
    let ports: Vec<u16> = services.split(|c: char| !c.is_ascii_digit()).filter_map(|w| w.parse().ok()).collect();
    let (echo, discard, chargen) = (ports[0], ports[1], ports[2]);
    let netio = lines
        .iter()
        .find_map(|l| l.strip_prefix("netio: TCP test on ")?.split(',').next()?.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("{lines:?}"));
    let nc_test =
        announced_port(&lines, "answering eCos nc_test masters on UDP ").unwrap_or_else(|| panic!("{lines:?}"));

    let tcp = |proto: &'static str| vec!["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", proto];
    assert_one_line(
        echo,
        &tcp("iperf3"),
        &["an echo server answered (it sent iperf3's cookie back); add --proto echo"],
    );
    assert_one_line(
        echo,
        &tcp("netperf"),
        &["an echo server answered (it sent netperf's request back); add --proto echo"],
    );
    assert_one_line(chargen, &tcp("iperf3"), &["a chargen server answered", "add --proto chargen"]);
    // UDP iperf2 at an echo port: the end datagram comes back as sent, not as a server report.
    assert_one_line(
        echo,
        &["udp", "127.0.0.1", "-p", "{port}", "-t", "1", "-b", "1M", "--proto", "iperf2"],
        &["not an iperf2 server: the end datagram came back exactly as sent", "add --proto echo"],
    );
    assert_one_line(chargen, &tcp("netperf"), &["a chargen server answered", "add --proto chargen"]);
    assert_one_line(discard, &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1"], &[SILENT]);
    assert_one_line(
        netio,
        &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1"],
        &["closed the connection without answering, as a netio server does (suite netio --proto netio)"],
    );
    assert_one_line(
        nc_test,
        &["tcp", "127.0.0.1", "-p", "{port}", "-t", "1"],
        &["an eCos nc_test slave answered on UDP", "--proto nc-test"],
    );
}

/// `netchar tcp` with `--proto iperf2` (and `-R`), `echo`, `discard` and `chargen` against another kind
/// of server, a fresh one for each (`start`: the server, kept while the case runs, and its
/// port; an iperf3 server re-creates its listener after a client it could not serve, and resets
/// what connects meanwhile): each names what answered (`answered`, after "not an iperf2
/// server: " and the like). None of those protocols has a hello: iperf2 and discard are judged
/// by what came back on a stream their server never writes to, or by its close during the
/// test; echo and chargen by the answer to netchar's hello, which an echo server returns and a
/// chargen server throws away; iperf2's `-R` by the first bytes, its server's payload at once.
/// A server that waits for more of its client's bytes leaves those to wait `silent_opening`
/// (the 5 s hello timeout) and name the silent kinds. The cases run side by side, or one after
/// another where two of `start`'s servers cannot listen at once (`Cases::OneAtATime`).
fn service_clients_against<S>(
    start: impl Fn() -> Option<(S, u16)> + Sync,
    answered: &[&str],
    silent_opening: bool,
    cases_run: Cases,
) {
    let opening_unanswered =
        ["nothing came back to netchar's opening bytes within 5 s", &SILENT["said nothing, ".len()..]];
    let reverse_unanswered =
        ["nothing came within 5 s of the request to send (-R), and an iperf2 server sends at once"];
    // (the server asked for, -R or not, what a silent peer is named by when the case judges by
    // the opening answer)
    let cases: [(&str, bool, Option<&[&str]>); 5] = [
        ("an iperf2 server", false, None),
        ("an iperf2 server", true, Some(&reverse_unanswered)),
        ("a discard server", false, None),
        ("an echo server", false, Some(&opening_unanswered)),
        ("a chargen server", false, Some(&opening_unanswered)),
    ];
    let start = &start;
    let cases: Vec<Box<dyn FnOnce() + Send + '_>> = cases
        .into_iter()
        .map(|(expected, reverse, silent)| -> Box<dyn FnOnce() + Send + '_> {
            Box::new(move || {
                let Some((_server, port)) = start() else { return };
                let proto = expected.rsplit(' ').nth(1).unwrap();
                let mut args = vec!["tcp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", proto];
                if reverse {
                    args.push("-R");
                }
                let not = format!("not {expected}: ");
                let what = match silent {
                    Some(silent) if silent_opening => silent,
                    _ => answered,
                };
                assert_one_line(port, &args, &[[not.as_str()].as_slice(), what].concat());
            })
        })
        .collect();
    match cases_run {
        Cases::SideBySide => side_by_side(cases),
        Cases::OneAtATime => cases.into_iter().for_each(|case| case()),
    }
}

/// How `service_clients_against` runs its cases.
enum Cases {
    SideBySide,
    /// A second `netchar server --netio --netio-port 0` on the host fails to listen ("Address
    /// already in use") while the first runs; none of these cases waits on a silent peer.
    OneAtATime,
}

#[test]
fn iperf2_and_service_clients_against_a_netchar_server() {
    service_clients_against(
        || {
            let s = Server::start(&[]);
            let port = s.port;
            Some((s, port))
        },
        &["a netchar server answered (its hello): netchar's own protocol, which runs without --proto"],
        false,
        Cases::SideBySide,
    );
}

#[test]
fn iperf2_and_service_clients_against_an_iperf3_server() {
    service_clients_against(
        || {
            let s = PeerServer::start(
                "iperf3",
                &["-s", "-B", "127.0.0.1", "-p", "{port}"],
                false,
                "apt-get install iperf3",
            )?;
            let port = s.port;
            Some((s, port))
        },
        &["an iperf3 server answered (PARAM_EXCHANGE); add --proto iperf3"],
        false,
        Cases::SideBySide,
    );
}

#[test]
fn iperf2_and_service_clients_against_netperfs_netserver() {
    // netserver reads 656-byte requests: iperf2's and discard's streams are requests of a type
    // it does not know, answered with its error response; netchar's 40-byte hello is not one.
    service_clients_against(
        || {
            let s = PeerServer::start(
                "netserver",
                &["-D", "-L", "127.0.0.1", "-p", "{port}"],
                false,
                "apt-get install netperf",
            )?;
            let port = s.port;
            Some((s, port))
        },
        &["netperf's netserver answered (its error response to a request it does not know); add --proto netperf"],
        true,
        Cases::SideBySide,
    );
}

#[test]
fn iperf2_and_service_clients_against_a_netio_server() {
    // A netio server closes on a command it does not know: during iperf2's and discard's
    // test, and before echo's and chargen's.
    service_clients_against(
        || {
            let s = Server::start(&["--netio", "--netio-port", "0"]);
            let lines = [s.startup.clone(), s.log_lines(Duration::from_secs(2))].concat();
            let netio = lines
                .iter()
                .find_map(|l| l.strip_prefix("netio: TCP test on ")?.split(',').next()?.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("{lines:?}"));
            Some((s, netio))
        },
        &["as a netio server does (suite netio --proto netio)"],
        false,
        Cases::OneAtATime,
    );
}

/// Over UDP the peer's datagrams say less: the host's refusals (port unreachable: nothing takes
/// UDP there) and, for echo, none of them coming back. Then the same port is asked over TCP
/// what answers there. A discard service answers nothing by design, so a silent UDP port is
/// never called a wrong one for discard.
#[test]
fn udp_iperf2_echo_and_discard_clients_against_other_servers() {
    let udp = |proto: &'static str| vec!["udp", "127.0.0.1", "-p", "{port}", "-t", "1", "--proto", proto];
    let netchar_server = "on TCP at the same port, a netchar server answered (its hello)";
    let iperf3 = "on TCP at the same port, an iperf3 server answered (PARAM_EXCHANGE); add --proto iperf3";
    let (udp, netchar_server, iperf3) = (&udp, netchar_server, iperf3);
    let mut cases: Vec<Box<dyn FnOnce() + Send>> = vec![
        Box::new(move || {
            let s = Server::start(&[]);
            assert_one_line(s.port, &udp("echo"), &["not an echo server: none of the ", netchar_server]);
        }),
        Box::new(move || {
            let s = Server::start(&[]);
            assert_one_line(s.port, &udp("iperf2"), &["iperf2 server reports did not come back", netchar_server]);
        }),
        Box::new(move || {
            let s = Server::start(&[]);
            // -R: an iperf2 server sends as soon as the request comes; not one datagram came back.
            assert_one_line(
                s.port,
                &["udp", "127.0.0.1", "-p", "{port}", "-t", "1", "-R", "--proto", "iperf2"],
                &["not an iperf2 server: not one datagram came back for the -R request", netchar_server],
            );
        }),
        Box::new(|| {
            // netchar's server takes UDP at its port and drops what is not its own: as silent as
            // a discard service, and not called wrong.
            let s = Server::start(&[]);
            let port = s.port.to_string();
            let run = netchar(&["udp", "127.0.0.1", "-p", &port, "-t", "1", "--proto", "discard"]);
            assert_eq!(run.code, 0, "a silent UDP sink is what discard is: {}", run.stderr);
        }),
    ];
    for (proto, expected) in [
        ("iperf2", "not an iperf2 server: nothing takes UDP at port "),
        ("discard", "not a discard server: nothing takes UDP at port "),
        ("echo", "not an echo server: "),
    ] {
        cases.push(Box::new(move || {
            let Some(s) = PeerServer::start(
                "iperf3",
                &["-s", "-B", "127.0.0.1", "-p", "{port}"],
                false,
                "apt-get install iperf3",
            ) else {
                return;
            };
            assert_one_line(s.port, &udp(proto), &[expected, iperf3]);
        }));
    }
    side_by_side(cases);
}

/// The server's `rejected` line about the client that just ran, within 10 s.
fn rejected_line(s: &Server) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Some(l) = s.log_lines(Duration::from_millis(200)).into_iter().find(|l| l.starts_with("rejected ")) {
            return l;
        }
    }
    panic!("the server logged no rejected line");
}

/// Runs a peer tool's client (killed after 20 s at most; its own exit is not looked at: it
/// met a server of another protocol).
fn run_peer_client(program: &str, args: &[String]) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn peer_clients_at_netchars_port_are_named_with_the_listener_that_answers_them() {
    let s = Server::start(&[]);
    let port = s.port.to_string();
    let cases: [(&str, &str, Vec<String>, &str); 4] = [
        ("iperf3", "apt-get install iperf3", vec!["-c".into(), "127.0.0.1".into(), "-p".into(), port.clone(), "-t".into(), "1".into()], "an iperf3 client (its 37-byte cookie); this port speaks netchar: `netchar server --iperf3` answers iperf3 clients on 5201"),
        ("iperf", "apt-get install iperf", vec!["-c".into(), "127.0.0.1".into(), "-p".into(), port.clone(), "-t".into(), "1".into()], "an iperf2 client (its settings header); this port speaks netchar: `netchar server --iperf2` answers iperf2 clients on 5001"),
        ("netperf", "apt-get install netperf", vec!["-H".into(), "127.0.0.1".into(), "-p".into(), port.clone(), "-l".into(), "1".into()], "a netperf client (its control request); this port speaks netchar: `netchar server --netperf` answers netperf clients on 12865"),
        ("irtt", "apt-get install irtt", vec!["client".into(), "-d".into(), "1s".into(), "-i".into(), "100ms".into(), "--timeouts=1s".into(), format!("127.0.0.1:{port}")], "an irtt client (its open request); this port speaks netchar: `netchar server --irtt` answers irtt clients on 2112"),
    ];
    for (program, install, args, expect) in cases {
        let version = if program == "irtt" { "version" } else { "-v" };
        if !require::tool(&format!("{program}'s client against netchar's port"), program, &[version], install) {
            continue;
        }
        run_peer_client(program, &args);
        let line = rejected_line(&s);
        assert!(line.contains(expect), "{program}: {line:?} lacks {expect:?}");
    }
}

/// The flags and ports the wire names for each client are those of `netchar server`'s
/// listeners (netchar_wire::known writes them out, below the protocols' modules).
#[test]
fn the_named_listeners_are_netchar_servers_own() {
    use netchar_engine::protocols::LISTENERS;
    use netchar_wire::known::KnownProtocol as K;
    for known in [K::Iperf3, K::Iperf2, K::Netperf, K::Netio, K::Irtt] {
        let (flag, port) = known.listener();
        let listener = LISTENERS
            .iter()
            .find(|l| format!("--{}", l.flag) == flag)
            .unwrap_or_else(|| panic!("{known}: no listener {flag}"));
        assert_eq!(listener.ports[0].default, port, "{known}");
    }
    let services = LISTENERS.iter().find(|l| l.flag == "services").unwrap();
    let default = |name: &str| services.ports.iter().find(|p| p.flag == name).unwrap().default;
    assert_eq!(
        (K::Echo.listener(), K::Chargen.listener()),
        (("--services", default("echo-port")), ("--services", default("chargen-port")))
    );
}
