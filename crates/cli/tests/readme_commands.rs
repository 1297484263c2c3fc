//! README's commands are tests (issue 42): every command in README.md's ```sh blocks, and in
//! those of every guide in docs/ (`every_guide_is_checked` fails on one this file does not
//! name), is read from the document at test time and either run against a local server on
//! loopback, with its exit code checked, or found in this file's table with the reason it is not
//! run here. A command in neither fails the test, so a document and this test cannot drift apart.
//!
//! How a command is run: through `sh -c` in a temporary directory (its files land there), with
//! the built `netchar` first on PATH. `HOST` (and a guide's example address) becomes the local
//! server's `127.0.0.1:PORT`, `BOARD -p 5300` the C responder's port, `SINK -p 9` a UDP socket
//! of this test; `-t SECS` becomes 0.5 s (0.2 s a `--find-max-rate` trial, 0.1 s a sweep's step),
//! and a timed test without `-t` gets it; `--repeat 5` becomes `--repeat 3`; `suite ecos` runs
//! `--quick` (the whole sequence takes about 2 min on loopback). README's first command,
//! `cargo run --release`, is the quick characterization: the built binary runs `netchar -t 0.3`.
//! A synopsis (`netchar tcp HOST[:PORT] [-t SECS | -n BYTES] ...`) is not a command: each flag it
//! names must be in the help of the command it names.

#[path = "support/loopback.rs"]
mod common;
#[path = "support/require.rs"]
mod require;

use common::*;
use std::net::{TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the test does with one command of a document.
#[derive(Clone, Copy)]
enum Do {
    /// Run it (substituted as the file's comment says); it must exit with this code.
    Exit(i32),
    /// `cargo run --release`: the built binary's quick characterization, `netchar -t 0.3`.
    Quick,
    /// `netchar server ...`: started on 127.0.0.1 with an ephemeral port (and ephemeral peer
    /// ports); it must announce its limits and each peer listener, and exit 0 on SIGTERM.
    Server,
    /// A CI gate: it must pass on loopback (exit 0), and exit 1 when its threshold cannot be met.
    Gate,
    /// Against `iperf3 -s` on a free port.
    Iperf3,
    /// `make -C responder && responder/build/netchar-responder --port 5300`: built, then started
    /// on a free port, which `BOARD -p 5300` then means.
    Responder,
    /// `netchar exporter --listen ADDR ...`: started on 127.0.0.1:0; it must say where it listens.
    Exporter,
    /// A synopsis: every flag it names must be in `netchar COMMAND --help`.
    Synopsis,
    /// Not run here, for this reason.
    Not(&'static str),
}

const PACKAGING: &str = "packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root";

/// README.md: every command, in its order.
const README: &[(&str, Do)] = &[
    ("cargo run --release", Do::Quick),
    ("scripts/test", Do::Not("the whole test suite, this test among it; .ci/run runs it")),
    (
        "cargo install --locked --path crates/cli",
        Do::Not("a release build of several minutes installed into ~/.cargo/bin; the same release build is packaging/build-static.sh's, which packaging/check.sh runs"),
    ),
    ("bin=$(packaging/build-static.sh | tail -n 1)", Do::Not(PACKAGING)),
    ("packaging/build-deb.sh \"$bin\"", Do::Not(PACKAGING)),
    (
        "apt install ./target/packaging/netchar_0.1.0_amd64.deb",
        Do::Not("installs into this machine's system; packaging/check.sh installs and purges it, as root"),
    ),
    (
        "systemctl enable --now netchar",
        Do::Not("needs a booted systemd and the installed package; packaging/check.sh runs the unit in systemd-nspawn"),
    ),
    ("packaging/build-image.sh \"$bin\"", Do::Not(PACKAGING)),
    (
        "podman run -d --name netchar --runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 -p 5300:5300/tcp -p 5300:5300/udp localhost/netchar:0.1.0",
        Do::Not("needs podman, runc and the image, and publishes port 5300; packaging/check.sh runs the image with these options as a server and as a client"),
    ),
    ("netchar server", Do::Server),
    ("netchar tcp HOST -t 10 -P 4", Do::Exit(0)),
    ("netchar tcp HOST -R", Do::Exit(0)),
    ("netchar udp HOST -b 100M", Do::Exit(0)),
    ("netchar udp HOST -b 0 -l 64", Do::Exit(0)),
    ("netchar udp SINK -p 9 --proto sink -b 0 -l 64", Do::Exit(0)),
    ("netchar rr HOST -A 0,1", Do::Exit(0)),
    ("netchar crr HOST", Do::Exit(0)),
    ("netchar echo HOST --pattern 640x1024,10@10ms", Do::Exit(0)),
    ("netchar rr HOST --under-load rrul", Do::Exit(0)),
    (
        "netchar udp HOST -b 50M --console /dev/ttyUSB0",
        Do::Not("a serial console; crates/cli/tests/console.rs runs --console on a pseudo-terminal"),
    ),
    ("netchar tcp HOST --repeat 5 --save runs/after", Do::Exit(0)),
    ("netchar compare runs/before runs/after", Do::Exit(0)),
    ("netchar udp HOST --expect 'up.receiver.loss_percent < 0.1'", Do::Gate),
    ("netchar udp HOST --find-max-rate --loss 0.1", Do::Exit(0)),
    ("netchar suite bwsweep HOST --from 50M --to 1G", Do::Exit(0)),
    ("netchar suite ecos HOST", Do::Exit(0)),
    (
        "netchar run plans/example.toml HOST",
        Do::Not("its tests run 5 s each; crates/cli/tests/plans.rs runs plans/example.toml with its durations shortened (the_readme_example_plan_runs_and_its_gate_applies_to_the_tests_it_names)"),
    ),
    (
        "netchar suite bwsweep HOST --step-cmd 'ssh board devmem 0x2188000'",
        Do::Not("a command on a remote board over ssh; crates/cli/tests/step_commands.rs runs --step-cmd with local commands"),
    ),
    (
        "netchar udp HOST -b 100M --repeat 5 --reset-cmd 'ssh board reboot'",
        Do::Not("reboots a remote board over ssh; crates/cli/tests/reset_cmd.rs runs --reset-cmd with local commands"),
    ),
    ("netchar tcp HOST --json > run.json", Do::Exit(0)),
    ("netchar report runs/before runs/after --format html -o compare.html", Do::Exit(0)),
    ("netchar suite bwsweep HOST --plot sweep/ --report sweep.html", Do::Exit(0)),
    (
        "netchar udp HOST -b 100M --store --label build=1.4.2-37-gabc",
        Do::Not("writes into the user's data directory; crates/cli/tests/store.rs runs --store, history and the gate on loopback"),
    ),
    (
        "netchar history --metric bps",
        Do::Not("reads the user's store; crates/cli/tests/store.rs runs history on a store of its own"),
    ),
    (
        "netchar history --metric bps --format html -o trend.html",
        Do::Not("reads the user's store; crates/cli/tests/report_html.rs opens a trend page of a store of its own in chromium"),
    ),
    (
        "netchar udp HOST -b 100M --store --label build=1.4.2-38-gdef --expect-no-regression",
        Do::Not("writes into the user's data directory; crates/cli/tests/store.rs runs the gate against stores of its own"),
    ),
    ("netchar tcp HOST --proto iperf3", Do::Iperf3),
    ("netchar server --iperf3 --iperf2 --netperf", Do::Server),
    ("make -C responder && responder/build/netchar-responder --port 5300", Do::Responder),
    ("netchar tcp BOARD -p 5300 -R", Do::Exit(0)),
    ("netchar exporter --listen [::]:9300 --allow-target 10.0.0.0/8", Do::Exporter),
    ("netchar mesh render --nodes node-a,node-b,node-c > mesh.yaml", Do::Exit(0)),
    (
        "pscheduler task --tool netchar throughput --source A --dest B",
        Do::Not("needs a perfSONAR pScheduler installation; crates/cli/tests/pscheduler.rs runs the plugin's method scripts"),
    ),
];

/// The tour's `compare` compares with a set saved before a change: saved first, as it would be.
const README_SETUP: &[&str] = &["netchar tcp HOST --repeat 5 --save runs/before"];

const USAGE: &[(&str, Do)] = &[
    ("netchar server [-B ADDR] [-p PORT] [--one-off] [--json] [--config FILE] [--psk-file FILE] [--max-concurrent N] [--max-duration SECS] [--max-rate RATE] [--max-streams N] [--max-starts-per-minute N] [--max-per-source N] [--max-connections N] [--idle-timeout SECS] [--allow-data-from CIDR ...] [--allow-peers CIDR ...] [--iperf3 [--iperf3-port PORT]] [--iperf2 [--iperf2-port PORT]] [--netperf [--netperf-port PORT]] [--netio [--netio-port PORT]] [--nc-test [--nc-test-port PORT --nc-test-data-port PORT]] [--services [--echo-port PORT --discard-port PORT --chargen-port PORT]]", Do::Synopsis),
    ("netchar server", Do::Server),
    ("netchar tcp HOST[:PORT] [-t SECS | -n BYTES] [-P STREAMS] [-R | --bidir] [-l BYTES] [-w BYTES] [-M MSS] [-N] [-C ALGO] [-A CPU[,SERVERCPU]] [--zerocopy] [--skip-rx-copy] [--rx-wake-per-segment] [-b RATE] [--payload KIND[:SEED]] [--verify] [-i SECS] [-O SECS] [-4|-6] [--json | --json-out FILE] [--title TEXT] [-f k|m|g|K|M|G] [--connect-timeout SECS] [--busy-wait SECS] [--psk-file FILE [--psk-user USER]] [--tos VALUE | --dscp NAME] [--flowlabel N] [--df] [-B ADDR[:PORT]] [--bind-dev IF]", Do::Synopsis),
    ("netchar tcp 127.0.0.1 -t 3 -P 2", Do::Exit(0)),
    ("netchar udp HOST[:PORT] [-b RATE | --pps N] [--per-stream] [-l BYTES] [--pattern SPEC] [--grace DURATION] [--pacing-quantum DURATION] [--no-gso] [--gro] [--no-udp-checksum] + the common flags of `netchar tcp` (-t/-n, -P, -R/--bidir, -i, -O, -A, -4/-6, --json/--json-out, --title, -f)", Do::Synopsis),
    ("netchar udp 192.0.2.7 -b 100M -t 5", Do::Exit(0)),
    ("netchar udp 192.0.2.7 -b 0 -l 64 -P 2", Do::Exit(0)),
    ("netchar udp 192.0.2.7 --pattern 640x1024", Do::Exit(0)),
    (
        "netchar udp 198.18.0.2 -p 9 --proto sink -b 0 -l 64 -P 2 -t 10 --nft-counter 'inet count out'",
        Do::Not("needs a sink interface and the nft chain `inet count out` (root, a network namespace); crates/cli/tests/netns_send_only.rs sets them up and checks the counts"),
    ),
    (
        "netchar run plans/pps.toml",
        Do::Not("needs the sinks at 198.18.0.2 and 2001:2::2 (root, a network namespace); crates/cli/tests/netns_send_only.rs runs the plan, shortened"),
    ),
    (
        "netchar compare runs/pps-udp4 runs/pps-udp4-nocsum runs/pps-udp6 --metric tx-pps --accept-difference udp_checksum",
        Do::Not("compares plans/pps.toml's runs; crates/cli/tests/netns_send_only.rs runs it on them"),
    ),
    (
        "netchar udp 198.18.0.2 -p 9000 --proto sink --xdp sink0 -b 0 -l 64 -t 10",
        Do::Not("needs root and the sink interface sink0 (a network namespace); crates/cli/tests/netns_xdp.rs sends through AF_XDP on a veth pair and checks the counts"),
    ),
    (
        "netchar udp 198.18.0.2 -p 9000 --proto sink --xdp sink0 --xdp-live --no-udp-checksum -b 0 -l 64 -t 10",
        Do::Not("needs root and the sink interface sink0 (a network namespace); crates/cli/tests/netns_xdp.rs sends through the live frames on a veth pair and checks the counts"),
    ),
    (
        "netchar udp server.example --xdp eth0:2 --pps 1M -l 64",
        Do::Not("needs root and an interface eth0 with a queue 2 on the route to a server; crates/cli/tests/netns_xdp.rs runs --xdp against a server on a veth pair"),
    ),
    (
        "netchar xdp-count sink1 -p 9000 --json",
        Do::Not("needs root and the sink's interface sink1, and runs until Ctrl-C; crates/cli/tests/netns_xdp.rs runs it on a veth pair and ends it so"),
    ),
    ("netchar rr HOST [--udp] [-l BYTES] [--response BYTES] [--inflight N] [-P N] [-t SECS | -n TRANSACTIONS] [--timeout D] [--busy-poll] [--wakeup-stamps] [--under-load rrul|LOAD[,LOAD...]] [-A CPU[,SERVERCPU]]", Do::Synopsis),
    ("netchar crr HOST [-l BYTES] [--response BYTES] [-P N] [-t SECS | -n TRANSACTIONS]", Do::Synopsis),
    ("netchar echo HOST [--udp] [--pattern 640x1024[,10@10ms]]", Do::Synopsis),
    ("netchar rr 127.0.0.1 -A 0,1 -t 3 -i 0", Do::Exit(0)),
    ("netchar completions bash|zsh|fish|elvish|powershell", Do::Synopsis),
    ("netchar man [COMMAND]", Do::Synopsis),
];

const STATISTICS: &[(&str, Do)] = &[
    (
        "netchar compare A.json B.json [C.json ...] [--metric NAME|PATH] [-c 80|90|95|98|99|99.5] [--welch]",
        Do::Synopsis,
    ),
    ("netchar tcp 192.0.2.7 -t 5 --repeat 5 --save runs/before", Do::Exit(0)),
    ("netchar tcp 192.0.2.7 -t 5 --repeat 5 --save runs/after", Do::Exit(0)),
    ("netchar compare runs/before runs/after", Do::Exit(0)),
    ("netchar udp 127.0.0.1 -b 0 -l 64 --repeat 5 --save A", Do::Exit(0)),
    ("netchar udp 127.0.0.1 -b 0 -l 64 --repeat 5 --save B --no-udp-checksum", Do::Exit(0)),
    // The guide shows this refusal: exit 2, one line naming the fields.
    ("netchar compare A B --metric pps", Do::Exit(2)),
    ("netchar udp 127.0.0.1 -b 0 -l 64 --repeat 5 --save C --no-gso", Do::Exit(0)),
    ("netchar compare C B --metric pps --accept-difference udp_checksum", Do::Exit(0)),
];

const SUITES: &[(&str, Do)] = &[
    ("netchar udp HOST --find-max-rate [--loss PCT] [-t TRIAL_SECS] [-b CEILING]", Do::Synopsis),
    ("netchar suite bwsweep HOST [--from 50M] [--to 1G] [--step 50M] [-t 2] [--json]", Do::Synopsis),
    ("netchar suite netio HOST [--tcp] [-u] [-b SIZE[k],... | --preset mdk] [--tx-only] [-t 2] [--json]", Do::Synopsis),
    ("netchar suite sizes HOST [-t 2 | -n BYTES] [-b SIZE,...] [--json]", Do::Synopsis),
    ("netchar suite ecos HOST [--quick] [--json]", Do::Synopsis),
];

/// docs/plans.md has no command block (its examples are a plan file and error lines).
const PLANS: &[(&str, Do)] = &[];

const REPORT: &[(&str, Do)] = &[
    ("netchar report FILES... [--format text|markdown|csv|json|svg|png|html] [--intervals] [-o OUT] [--unit k|m|g|K|M|G]", Do::Synopsis),
    ("netchar [tcp|udp|rr|crr|echo|suite|run ...] [--plot DIR] [--report FILE.html]", Do::Synopsis),
    ("netchar tcp 192.0.2.7 -t 5 --repeat 5 --save runs/before", Do::Exit(0)),
    ("netchar report runs/before --format markdown", Do::Exit(0)),
    ("netchar report runs/before --format csv --intervals -o before.csv", Do::Exit(0)),
    ("netchar suite bwsweep 192.0.2.7 --from 100M --to 1G --step 100M --plot sweep/ --report sweep.html", Do::Exit(0)),
    ("netchar report runs/before runs/after --format html -o compare.html", Do::Exit(0)),
    // Run as written, in the temporary directory: `crates` there links to the repository's, and
    // the screenshot goes to its docs/, not the repository's.
    ("(cd crates/report/tests/fixtures-plots && netchar report suite-bwsweep-knee.json rr-under-load.json --format html -o \"$OLDPWD/report-sample.html\")", Do::Exit(0)),
    ("chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,2050 --screenshot=\"$PWD/docs/report-sample.png\" \"file://$PWD/report-sample.html\"", Do::Exit(0)),
];

/// The guide's `report runs/before runs/after` reads the set statistics.md saves after a change.
const REPORT_SETUP: &[&str] = &["netchar tcp 192.0.2.7 -t 5 --repeat 5 --save runs/after"];

const CONSOLE: &[(&str, Do)] = &[
    ("netchar udp BOARD -b 50M --console /dev/ttyUSB0:115200", Do::Not("a serial console on a board; crates/cli/tests/console.rs runs --console on a pseudo-terminal")),
    ("netchar tcp BOARD --console-cmd 'ssh board dmesg -w'", Do::Not("a command on a remote board over ssh; crates/cli/tests/console.rs runs --console-cmd with a local command")),
    ("netchar udp BOARD -b 50M --console /dev/ttyACM0 --json-out r.json --report r.html", Do::Not("a serial console on a board; crates/cli/tests/console.rs runs --console on a pseudo-terminal, with its report")),
];

const COMPATIBILITY: &[(&str, Do)] = &[
    ("netchar tcp|udp HOST --proto iperf3 [-t SECS | -n BYTES] [-P N] [-R | --bidir] [-l] [-b] [-w] [-M] [-N] [-C] [-O]", Do::Synopsis),
    ("netchar server --iperf3 [--iperf3-port 5201]", Do::Synopsis),
    ("netchar tcp HOST --proto iperf2 [-t SECS | -n BYTES] [-P N] [-R] [-l]", Do::Synopsis),
    ("netchar tcp HOST --proto iperf2 -d|-r [-t SECS] [-l]", Do::Synopsis),
    ("netchar udp HOST --proto iperf2 [-t SECS] [-b RATE] [-P N] [-R] [-l]", Do::Synopsis),
    ("netchar tcp HOST --proto lwiperf [-t SECS] [-P N]", Do::Synopsis),
    ("netchar server --iperf2 [--iperf2-port 5001]", Do::Synopsis),
    ("netchar suite netio HOST --proto netio [-p 18767] [--tcp] [-u] [-b SIZE[k],... | --preset mdk] [--tx-only] [--duration 6] [--rx-timeout 10] [--json]", Do::Synopsis),
    ("netchar server --netio [--netio-port 18767]", Do::Synopsis),
    ("netchar tcp|udp|rr|crr HOST --proto netperf [-p 12865] [-t SECS | -n N] [-P N] [-R] [-l BYTES] [--response BYTES] [-w] [-N] [-C]", Do::Synopsis),
    ("netchar server --netperf [--netperf-port 12865]", Do::Synopsis),
    ("netchar tcp HOST --proto discard|echo|chargen [-t SECS] [-P N] [-l]", Do::Synopsis),
    ("netchar udp HOST --proto discard|echo [-b RATE] [-l]", Do::Synopsis),
    ("netchar rr HOST --proto echo [--udp] [-l BYTES] netchar echo HOST --proto echo [--udp] --pattern 640x1024", Do::Synopsis),
    ("netchar server --services [--echo-port 7] [--discard-port 9] [--chargen-port 19]", Do::Synopsis),
    ("netchar suite ecos HOST --proto nc-test", Do::Not("needs an eCos nc_test slave; crates/cli/tests/nc_test_interop.rs runs the suite against netchar server --nc-test")),
    ("netchar echo HOST --proto nc-test [--udp] --pattern 2048x1024[,10@10ms]", Do::Synopsis),
    ("netchar tcp|udp HOST --proto nc-test [-R] [-l 1024 -n BYTES | --pattern 640x1024]", Do::Synopsis),
    ("netchar server --nc-test [--nc-test-port 7777] [--nc-test-data-port 8770]", Do::Synopsis),
];

const NETPERF: &[(&str, Do)] = &[
    ("NETPERF_BUILD=<netperf build dir> ./capture.sh tcp_stream 24001 -l 1 -t TCP_STREAM -- -m 1024 -S 65536", Do::Not("needs a netperf build tree (NETPERF_BUILD) and tcpdump; its recorded captures are replayed by crates/wire/src/netperf tests")),
];

const EMBEDDED: &[(&str, Do)] = &[
    (
        "make -C responder",
        Do::Not("the build of the guide's `make -C responder && responder/build/netchar-responder --port 5300`, which this test runs"),
    ),
    ("responder/build/netchar-responder --port 5300", Do::Not("a server that runs until stopped, on a fixed port; the guide's `make -C responder && responder/build/netchar-responder --port 5300` below is started on a free port and measured")),
    ("netchar tcp 127.0.0.1 -p 5300 -t 3", Do::Not("against the responder on port 5300; the guide's `netchar tcp BOARD -p 5300 ...` runs against the responder started below, and crates/cli/tests/responder.rs measures it")),
    ("apt-get install liblwip-dev", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("make -C responder lwip-tap", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("ip tuntap add dev nctap0 mode tap", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("ip addr add 10.77.0.1/24 dev nctap0; ip link set nctap0 up", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("responder/build/netchar-responder-lwip --tap nctap0 --ip 10.77.0.2/24 [--gw 10.77.0.1] [--port 5300] [--mac 02:..]", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("netchar tcp 10.77.0.2 -p 5300 [-R]; netchar udp 10.77.0.2 -p 5300 -b 10M [-R]; netchar rr 10.77.0.2 -p 5300", Do::Synopsis),
    ("make -C responder lwip-src", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("make -C responder board", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("ip tuntap add dev nctap0 mode tap && ip addr add 10.77.0.1/24 dev nctap0 && ip link set nctap0 up", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("make -C responder board-run TAP=nctap0 [IMAGE=peers] [ICOUNT=5]", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("netchar tcp 10.77.0.2 -p 5300 -n 4000000 [-R]; netchar udp 10.77.0.2 -p 5300 -b 2M; netchar rr 10.77.0.2 -p 5300", Do::Synopsis),
    ("netchar suite ecos 10.77.0.2 --proto nc-test; netchar suite netio 10.77.0.2 --proto netio -b 4k", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("ip addr add fd00:77::1/64 dev nctap0 nodad", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("netchar tcp fd00:77::2 -p 5300 -n 4000000; netchar echo fd00:77::2 --proto nc-test --udp", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("make -C responder && responder/build/netchar-responder --port 5300", Do::Responder),
    ("netchar tcp BOARD -p 5300 [-R | --bidir] [-P N] [-t S | -n BYTES]", Do::Synopsis),
    ("netchar udp BOARD -p 5300 -b 10M [-R]", Do::Synopsis),
    ("netchar rr BOARD -p 5300 [--udp]; netchar echo BOARD -p 5300 --pattern 640x1024,10@10ms", Do::Synopsis),
    ("make -C responder arm-check", Do::Not("cross compilers and qemu-user for ARM; packaging/check.sh builds the responder for arm64 and armhf and measures it under qemu-user")),
    ("responder/build/netchar-responder-lwip --tap nctap0 --ip 10.77.0.2/24", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("responder/build/netchar-responder --nc-test-port 7777 --nc-test-data-port 8770 --netio-port 18767 --echo-port 7 --discard-port 9", Do::Not("fixed ports, two below 1024; crates/cli/tests/responder.rs starts the responder's roles on free ports and runs each peer protocol against them")),
    ("netchar suite ecos BOARD --proto nc-test", Do::Not("against the responder's nc_test role, which the responder started here does not run; crates/cli/tests/responder.rs runs it")),
    ("netchar suite netio BOARD --proto netio [-u]", Do::Synopsis),
    ("netchar tcp BOARD --proto echo|discard; netchar udp BOARD --proto echo|discard -b 10M", Do::Synopsis),
    ("make -C responder arm-roles", Do::Not("cross compilers and qemu-user for ARM; packaging/check.sh builds the responder for arm64 and armhf and measures it under qemu-user")),
    ("make -C responder lwip-src board", Do::Not("needs root, a tap device and the lwIP sources; .ci/run runs `make -C responder lwip-src board-check`, which builds the lwIP responder and the board and measures them")),
    ("netchar tcp 10.77.0.2 -p 5300 -n 4000000 [-R]; netchar suite ecos 10.77.0.2 --proto nc-test", Do::Synopsis),
];

const SCALE_OUT: &[(&str, Do)] = &[
    ("make -C pscheduler-tool-netchar install DESTDIR=/usr/lib/pscheduler/classes/tool/netchar CONFDIR=/etc/pscheduler/tool", Do::Not("installs into a perfSONAR pScheduler's directories; crates/cli/tests/pscheduler.rs runs the plugin's method scripts from the source tree")),
    ("pscheduler task --tool netchar throughput --source A --dest B --duration PT10S", Do::Not("needs a perfSONAR pScheduler installation; crates/cli/tests/pscheduler.rs runs the plugin's method scripts")),
    ("netchar pscheduler enumerate", Do::Exit(0)),
    ("echo '{\"type\":\"throughput\",\"spec\":{\"schema\":1,\"dest\":\"b\",\"ip-tos\":8}}' | netchar pscheduler can-run", Do::Exit(0)),
    ("netchar exporter --listen [::]:9300 --allow-target 10.0.0.0/8 [--allow-target 2001:db8::/32] [--max-duration 10] [--timeout-offset 0.5] [--psk-file FILE [--psk-user USER]]", Do::Synopsis),
    ("curl 'http://localhost:9300/probe?target=10.1.2.3:5300&proto=tcp&reverse=0&rate=&duration=5'", Do::Not("an exporter on port 9300 probing 10.1.2.3; crates/cli/tests/exporter.rs runs /probe against a local server")),
    ("netchar mesh render --nodes node-a,node-b,node-c [--host-network] [--schedule \"0 */4 * * *\"] > mesh.yaml", Do::Synopsis),
    ("netchar mesh run --node node-a --nodes node-a,node-b=10.0.0.2,node-c=10.0.0.3:5300 --start UNIX_SECONDS --slot 15 [--test tcp|udp|rr] [--psk-file FILE] [-- -t 10 -P 2]", Do::Synopsis),
    ("netchar mesh matrix mesh.log [--csv | --html | --format text|csv|html] [-o FILE] [--metric throughput|rtt|latency]", Do::Synopsis),
];

const INSTALL: &[(&str, Do)] = &[
    ("cargo install --locked --path crates/cli", Do::Not("a release build of several minutes installed into ~/.cargo/bin; the same release build is packaging/build-static.sh's, which packaging/check.sh runs")),
    ("cargo install --locked --path crates/cli --profile dist", Do::Not("a dist build of several minutes installed into ~/.cargo/bin; packaging/build-static.sh, which packaging/check.sh runs, builds the same profile")),
    ("netchar man > netchar.1", Do::Exit(0)),
    ("netchar completions bash > /etc/bash_completion.d/netchar", Do::Not("writes into /etc; crates/cli/tests/completions_man.rs checks every shell's completions")),
    ("packaging/build-static.sh", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("ldd target/x86_64-unknown-linux-gnu/dist/netchar", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf", Do::Not("downloads standard libraries with rustup; CI builds for the host only unless NETCHAR_PACKAGING_CROSS=1")),
    ("apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross", Do::Not("installs packages into this machine's system; .ci/run installs what CI needs")),
    ("packaging/build-static.sh aarch64-unknown-linux-gnu", Do::Not("a cross release build of several minutes; NETCHAR_PACKAGING_CROSS=1 packaging/check.sh builds and runs it")),
    ("packaging/build-static.sh armv7-unknown-linux-gnueabihf", Do::Not("a cross release build of several minutes; NETCHAR_PACKAGING_CROSS=1 packaging/check.sh builds and runs it")),
    ("scp target/aarch64-unknown-linux-gnu/dist/netchar board:", Do::Not("copies to a board over ssh")),
    ("apt-get install qemu-user-static", Do::Not("installs packages into this machine's system; .ci/run installs what CI needs")),
    ("qemu-aarch64-static target/aarch64-unknown-linux-gnu/dist/netchar -t 1", Do::Not("a cross release build of several minutes; NETCHAR_PACKAGING_CROSS=1 packaging/check.sh builds and runs it")),
    ("tar xf rust-1.88.0-x86_64-unknown-linux-gnu.tar.xz && rust-1.88.0-x86_64-unknown-linux-gnu/install.sh --prefix=/opt/rust", Do::Not("installers fetched elsewhere, installed into /opt/rust; the guide says this path was not tried here")),
    ("tar xf rust-std-1.88.0-aarch64-unknown-linux-gnu.tar.xz && rust-std-1.88.0-aarch64-unknown-linux-gnu/install.sh --prefix=/opt/rust", Do::Not("installers fetched elsewhere, installed into /opt/rust; the guide says this path was not tried here")),
    ("apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross", Do::Not("installs packages into this machine's system; .ci/run installs what CI needs")),
    ("PATH=/opt/rust/bin:$PATH packaging/build-static.sh aarch64-unknown-linux-gnu", Do::Not("needs a toolchain installed from the Rust project's standalone installers into /opt/rust, which CI does not have")),
    ("make -C responder CC=aarch64-linux-gnu-gcc BUILD=build/aarch64-linux-gnu CFLAGS=\"-O2 -static\"", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("make -C responder CC=arm-linux-gnueabihf-gcc BUILD=build/arm-linux-gnueabihf CFLAGS=\"-O2 -static\"", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("bin=$(packaging/build-static.sh | tail -n 1)", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("packaging/build-deb.sh \"$bin\"", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("apt install ./target/packaging/netchar_0.1.0_amd64.deb", Do::Not("installs into this machine's system; packaging/check.sh installs and purges it, as root")),
    ("systemctl enable --now netchar", Do::Not("needs a booted systemd and the installed package; packaging/check.sh runs the unit in systemd-nspawn (check-service.sh)")),
    ("journalctl -u netchar", Do::Not("needs a booted systemd and the installed package; packaging/check.sh runs the unit in systemd-nspawn (check-service.sh)")),
    ("install -m 0600 keys /etc/netchar/psk", Do::Not("writes the installed package's key file into /etc; crates/cli/tests covers --psk-file with temporary files")),
    ("systemctl edit netchar", Do::Not("needs a booted systemd and the installed package; packaging/check.sh runs the unit in systemd-nspawn (check-service.sh)")),
    ("systemctl restart netchar", Do::Not("needs a booted systemd and the installed package; packaging/check.sh runs the unit in systemd-nspawn (check-service.sh)")),
    ("packaging/build-image.sh \"$bin\"", Do::Not("packaging/check.sh (run by .ci/run after the tests) builds it and runs what it built, as root")),
    ("podman run -d --name netchar -p 5300:5300/tcp -p 5300:5300/udp localhost/netchar:0.1.0", Do::Not("needs podman and the image; packaging/check.sh runs the image as a server and as a client, with these options where the VM needs them")),
    ("podman run --rm --network host localhost/netchar:0.1.0 tcp HOST -t 10", Do::Not("needs podman and the image; packaging/check.sh runs the image as a server and as a client, with these options where the VM needs them")),
    ("podman run -d --name netchar --runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 -p 5300:5300/tcp -p 5300:5300/udp localhost/netchar:0.1.0", Do::Not("needs podman and the image; packaging/check.sh runs the image as a server and as a client, with these options where the VM needs them")),
    ("podman run --rm --runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 --network host localhost/netchar:0.1.0 tcp HOST -t 10", Do::Not("needs podman and the image; packaging/check.sh runs the image as a server and as a client, with these options where the VM needs them")),
    ("podman load -i netchar-image_0.1.0_amd64.tar", Do::Not("loads or pushes the image archive packaging/check.sh builds; containerd and a registry are not on CI's machine")),
    ("ctr -n k8s.io images import netchar-image_0.1.0_amd64.tar", Do::Not("loads or pushes the image archive packaging/check.sh builds; containerd and a registry are not on CI's machine")),
    ("buildah push localhost/netchar:0.1.0 docker-archive:netchar.tar:localhost/netchar:0.1.0", Do::Not("loads or pushes the image archive packaging/check.sh builds; containerd and a registry are not on CI's machine")),
    ("buildah push localhost/netchar:0.1.0 docker://registry.example/netchar:0.1.0", Do::Not("loads or pushes the image archive packaging/check.sh builds; containerd and a registry are not on CI's machine")),
    ("netchar mesh render --nodes a,b,c --image registry.example/netchar:0.1.0 > mesh.yaml", Do::Exit(0)),
];

const STORE_TESTED: &str = "writes to the user's own store (the data directory); crates/cli/tests/store.rs runs --store, --label, history, --expect-no-regression and store import against a store of its own";

/// docs/history.md.
const HISTORY: &[(&str, Do)] = &[
    ("netchar udp HOST -b 100M --store --label build=1.4.2-37-gabc --label board=rev-b", Do::Not(STORE_TESTED)),
    ("netchar history --metric pps --label board=rev-b", Do::Not(STORE_TESTED)),
    (
        "netchar udp HOST -b 100M --store --label build=1.4.2-38-gdef --label board=rev-b --expect-no-regression",
        Do::Not(STORE_TESTED),
    ),
    ("netchar store import runs/ old-run.json --label build=1.4.1", Do::Not(STORE_TESTED)),
    (
        "netchar history --metric pps --label board=rev-b --format html -o trend.html",
        Do::Not("reads the user's store; crates/cli/tests/report_html.rs writes the trend page of a store of its own and opens it in chromium"),
    ),
    (
        "netchar history --metric pps --label board=rev-b --format csv -o pps.csv",
        Do::Not("reads the user's store; crates/cli/tests/history_otava.rs exports series of a store of its own as CSV"),
    ),
    (
        "otava analyze --config-file otava.yaml --postgres-hostname 127.0.0.1 --postgres-port 5432 --postgres-username lab --postgres-password secret --postgres-database netchar --since 2000-01-01 --branch any netchar-udp-pps",
        Do::Not("Apache Otava's PostgreSQL importer over the view run_metric_rows of a lab's server; not on CI's machine"),
    ),
    (
        "otava analyze --config-file otava.yaml --since 2000-01-01 netchar-udp-pps",
        Do::Not("Apache Otava over a CSV export; crates/cli/tests/history_otava.rs runs it on series of its own"),
    ),
];

/// Guides with no ```sh block: their examples are formats, tables and quoted lines.
const NO_COMMANDS: &[&str] =
    &["docs/sweeps.md", "docs/latency.md", "docs/json.md", "docs/peers.md", "docs/protocol.md", "docs/reliability.md"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `line` without a shell comment: from a `#` that starts a word outside quotes.
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// The commands of one ```sh block. In a block of `$ ` prompts, the prompted lines (the others
/// are output); else every line, a line that starts with white space (or follows one ending in
/// `\`) continuing the one before. Comments are stripped and white space collapsed.
fn block_commands(lines: &[&str]) -> Vec<String> {
    let prompted = lines.iter().any(|l| l.starts_with("$ "));
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in lines {
        let (continues, body) = if prompted {
            match line.strip_prefix("$ ") {
                Some(b) => (false, b),
                None => continue,
            }
        } else {
            (open || line.starts_with(char::is_whitespace), *line)
        };
        let body = strip_comment(body).trim();
        if body.is_empty() {
            continue;
        }
        open = body.ends_with('\\');
        let body = body.trim_end_matches('\\').trim();
        match out.last_mut() {
            Some(last) if continues => {
                last.push(' ');
                last.push_str(body);
            }
            _ => out.push(body.to_string()),
        }
    }
    out.into_iter().map(|c| c.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
}

/// Every command in the ```sh blocks of `text`, in order.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in text.lines() {
        match &mut block {
            None if line.trim() == "```sh" => block = Some(Vec::new()),
            None => {}
            Some(lines) if line.trim_start().starts_with("```") => {
                out.extend(block_commands(lines));
                block = None;
            }
            Some(lines) => lines.push(line),
        }
    }
    assert!(block.is_none(), "a ```sh block is not closed");
    out
}

/// What the commands of one document share while they run.
struct Ctx {
    doc: &'static str,
    dir: tempfile::TempDir,
    server: Server,
    sink: UdpSocket,
    /// The C responder and its port, once README's responder command ran.
    responder: Option<(Child, u16)>,
    failures: Vec<String>,
    ran: usize,
    listed: usize,
}

impl Drop for Ctx {
    fn drop(&mut self) {
        if let Some((mut r, _)) = self.responder.take() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}

use netchar_testkit::ports::free_tcp_port as free_port;

impl Ctx {
    fn new(doc: &'static str) -> Self {
        Ctx {
            doc,
            dir: tempfile::tempdir().unwrap(),
            server: Server::start(&[]),
            sink: UdpSocket::bind("127.0.0.1:0").unwrap(),
            responder: None,
            failures: Vec::new(),
            ran: 0,
            listed: 0,
        }
    }

    fn fail(&mut self, cmd: &str, what: String) {
        self.failures.push(format!("{}: `{cmd}`: {what}", self.doc));
    }

    /// `cmd` as it runs here: local addresses and ports, short durations and repeats.
    fn local(&self, cmd: &str, host_port: u16) -> String {
        let host = format!(" 127.0.0.1:{host_port} ");
        let words: Vec<&str> = cmd.split(' ').collect();
        let step = if cmd.contains("--find-max-rate") {
            "0.2"
        } else if cmd.starts_with("netchar suite bwsweep") {
            "0.1"
        } else {
            "0.5"
        };
        let mut s = format!(" {cmd} ");
        for example in [" HOST ", " 192.0.2.7 ", " 127.0.0.1 "] {
            s = s.replace(example, &host);
        }
        if s.contains(" BOARD ") {
            let port = self.responder.as_ref().map_or(0, |r| r.1);
            s = s.replace(" BOARD ", " 127.0.0.1 ").replace(" -p 5300 ", &format!(" -p {port} "));
        }
        if s.contains(" SINK ") {
            let port = self.sink.local_addr().unwrap().port();
            s = s.replace(" SINK ", " 127.0.0.1 ").replace(" -p 9 ", &format!(" -p {port} "));
        }
        if let Some(i) = words.iter().position(|w| *w == "-t") {
            s = s.replace(&format!(" -t {} ", words[i + 1]), &format!(" -t {step} "));
        }
        s = s.replace(" --repeat 5 ", " --repeat 3 ");
        let timed =
            matches!(words.get(1), Some(&("tcp" | "udp" | "rr" | "crr"))) || cmd.starts_with("netchar suite bwsweep");
        if timed && !words.contains(&"-t") && !words.contains(&"-n") && !words.contains(&"--pattern") {
            s.push_str(&format!("-t {step} "));
        }
        if cmd.starts_with("netchar suite ecos") && !words.contains(&"--quick") {
            s.push_str("--quick ");
        }
        s.trim().to_string()
    }

    /// Runs `shell` through `sh -c` in the temporary directory with the built netchar first
    /// on PATH: (exit code, stdout, stderr).
    fn sh(&self, shell: &str) -> (i32, String, String) {
        let bin_dir = Path::new(BIN).parent().unwrap();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new("sh")
            .args(["-c", shell])
            .current_dir(self.dir.path())
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run sh");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs `cmd` (substituted) and checks its exit code.
    fn expect(&mut self, cmd: &str, shell: &str, code: i32) {
        let started = Instant::now();
        let (got, stdout, stderr) = self.sh(shell);
        eprintln!("{}: `{cmd}` ran as `{shell}`: exit {got} in {:.1} s", self.doc, started.elapsed().as_secs_f64());
        if got != code {
            let tail =
                |s: &str| s.lines().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            self.fail(
                cmd,
                format!(
                    "ran as `{shell}`: exit {got}, not {code}\nstdout:\n{}\nstderr:\n{}",
                    tail(&stdout),
                    tail(&stderr)
                ),
            );
            return;
        }
        // A result redirected to a file must be one JSON document.
        if let Some((_, file)) = shell.split_once("--json > ") {
            let file = file.split_whitespace().next().unwrap();
            let text = std::fs::read_to_string(self.dir.path().join(file)).unwrap_or_default();
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                self.fail(cmd, format!("{file} is not JSON: {e}"));
            }
        }
    }

    fn run(&mut self, cmd: &str, what: Do) {
        match what {
            Do::Not(reason) => {
                eprintln!("{}: `{cmd}` not run: {reason}", self.doc);
                self.listed += 1;
                return;
            }
            Do::Synopsis => {
                self.listed += 1;
                return self.synopsis(cmd);
            }
            _ => self.ran += 1,
        }
        let port = self.server.port;
        match what {
            Do::Exit(code) => {
                let tool = cmd.split([' ', '(']).find(|w| !w.is_empty()).unwrap();
                if tool != "netchar"
                    && tool != "cd"
                    && !require::tool(cmd, tool, &["--version"], "CI installs it (.ci/run)")
                {
                    return;
                }
                let shell = self.local(cmd, port);
                self.expect(cmd, &shell, code);
            }
            Do::Quick => self.expect(cmd, "netchar -t 0.3", 0),
            Do::Gate => {
                let shell = self.local(cmd, port);
                self.expect(cmd, &shell, 0);
                // The same gate with a threshold no run can meet.
                let missed = shell.replace("< 0.1", "< 0");
                assert_ne!(missed, shell, "the gate no longer reads `< 0.1`");
                self.expect(cmd, &missed, 1);
            }
            Do::Server => self.server_command(cmd),
            Do::Iperf3 => {
                if !require::tool(cmd, "iperf3", &["--version"], "apt-get install iperf3") {
                    return;
                }
                let peer_port = free_port();
                let mut iperf3 = Command::new("iperf3")
                    .args(["-s", "-p", &peer_port.to_string()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start iperf3 -s");
                let deadline = Instant::now() + Duration::from_secs(10);
                while TcpStream::connect(("127.0.0.1", peer_port)).is_err() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let shell = self.local(cmd, peer_port);
                self.expect(cmd, &shell, 0);
                let _ = iperf3.kill();
                let _ = iperf3.wait();
            }
            Do::Responder => self.responder(cmd),
            Do::Exporter => {
                let args: Vec<String> = cmd
                    .split(' ')
                    .skip(1)
                    .map(|w| if w.starts_with("[::]:") { "127.0.0.1:0".to_string() } else { w.to_string() })
                    .collect();
                let mut child =
                    Command::new(BIN).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
                let lines = lines_of(&mut child);
                let first = lines.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
                let running = child.try_wait().unwrap().is_none();
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("{}: `{cmd}` ran as `netchar {}`: {first}", self.doc, args.join(" "));
                if !first.contains("listening on 127.0.0.1:") || !running {
                    self.fail(cmd, format!("as `netchar {}`: start line {first:?}, running {running}", args.join(" ")));
                }
            }
            Do::Not(_) | Do::Synopsis => unreachable!(),
        }
    }

    /// `netchar server [PEERS...]` on 127.0.0.1 and ephemeral ports: its banner (checked by
    /// Server::start), a line for each peer listener, and exit 0 on SIGTERM.
    fn server_command(&mut self, cmd: &str) {
        let mut extra: Vec<String> = Vec::new();
        for w in cmd.split(' ').skip(2) {
            extra.push(w.to_string());
            if let Some(peer) = w.strip_prefix("--").filter(|p| ["iperf3", "iperf2", "netperf"].contains(p)) {
                extra.extend([format!("--{peer}-port"), "0".to_string()]);
            }
        }
        let extra_refs: Vec<&str> = extra.iter().map(String::as_str).collect();
        let mut server = Server::start(&extra_refs);
        let mut lines = server.startup.clone();
        lines.extend(server.log_lines(Duration::from_millis(300)));
        for peer in cmd.split(' ').skip(2).filter_map(|w| w.strip_prefix("--")) {
            let announce = format!("answering {peer} clients on ");
            if announced_port(&lines, &announce).is_none() {
                self.fail(cmd, format!("no line {announce:?} in {lines:?}"));
            }
        }
        server.signal("-TERM");
        let code = server.child.wait().unwrap().code();
        eprintln!(
            "{}: `{cmd}` ran as `netchar server -B 127.0.0.1 -p 0 {}`: exit {code:?} on SIGTERM",
            self.doc,
            extra.join(" ")
        );
        if code != Some(0) {
            self.fail(cmd, format!("exit {code:?} on SIGTERM, not 0"));
        }
    }

    /// `make -C responder && responder/build/netchar-responder --port 5300`: built in the tree
    /// (as crates/cli/tests/responder.rs builds it), started on a free port.
    fn responder(&mut self, cmd: &str) {
        if !require::tool(cmd, "make", &["--version"], "apt-get install make")
            || !require::tool(cmd, "gcc", &["--version"], "apt-get install gcc libc6-dev")
        {
            return;
        }
        let made = Command::new("make").args(["-C", "responder"]).current_dir(root()).output().unwrap();
        if !made.status.success() {
            return self.fail(cmd, format!("make: {}", String::from_utf8_lossy(&made.stderr)));
        }
        let mut child = Command::new(root().join("responder/build/netchar-responder"))
            .args(["--port", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the responder");
        let lines = lines_of(&mut child);
        let first = lines.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        std::thread::spawn(move || for _ in lines.iter() {});
        match first.rsplit(' ').next().and_then(|p| p.parse().ok()) {
            Some(port) => {
                eprintln!(
                    "{}: `{cmd}` ran as `make -C responder`, then `netchar-responder --port 0`: {first}",
                    self.doc
                );
                self.responder = Some((child, port));
            }
            None => {
                let _ = child.kill();
                let _ = child.wait();
                self.fail(cmd, format!("no port in the responder's start line {first:?}"));
            }
        }
    }

    fn synopsis(&mut self, cmd: &str) {
        // Two synopses on a line (`netchar rr ...; netchar echo ...`): each on its own.
        if let Some(i) = cmd.get(1..).and_then(|rest| rest.find(" netchar ")) {
            let (first, second) = cmd.split_at(i + 1);
            self.synopsis(first.trim_end_matches(';'));
            return self.synopsis(second.trim());
        }
        // What follows `--` goes to another command (`mesh run ... -- -t 10`).
        let cmd = cmd.split(" -- ").next().unwrap().split(" [-- ").next().unwrap();
        // `netchar tcp|udp HOST ...` is a synopsis of each: a flag must be in one's help.
        let alternatives = cmd.split(' ').nth(1).filter(|w| w.contains('|') && !w.starts_with('-'));
        if let Some(commands) = alternatives {
            let rest = cmd.splitn(3, ' ').nth(2).unwrap_or("");
            let helps: Vec<String> = commands.split('|').map(|c| netchar(&[c, "--help"]).stdout).collect();
            return self.check_flags(cmd, rest, &helps.join("\n"), commands);
        }
        let words: Vec<&str> =
            cmd.split(' ').skip(1).take_while(|w| w.chars().all(|c| c.is_ascii_lowercase())).collect();
        let mut args = words.clone();
        args.push("--help");
        let help = netchar(&args);
        if help.code != 0 {
            return self.fail(cmd, format!("`netchar {}` exit {}: {}", args.join(" "), help.code, help.stderr));
        }
        self.check_flags(cmd, cmd, &help.stdout, &args.join(" "));
    }

    /// Every flag named in `text` (part of `cmd`) must be in `help`, the help of `netchar OF`.
    fn check_flags(&mut self, cmd: &str, text: &str, help: &str, of: &str) {
        let flag = |w: &&str| {
            let rest = w.trim_start_matches('-');
            w.starts_with('-') && w.len() - rest.len() <= 2 && rest.starts_with(|c: char| c.is_ascii_alphanumeric())
        };
        let part_of_word = |c: char| c.is_ascii_alphanumeric() || c == '-';
        let named = |text: &str, f: &str| {
            text.match_indices(f).any(|(i, _)| {
                let after = text[i + f.len()..].chars().next().unwrap_or(' ');
                let before = text[..i].chars().next_back().unwrap_or(' ');
                !part_of_word(after) && !part_of_word(before)
            })
        };
        let missing: Vec<&str> = text
            .split([' ', '[', ']', '|', '(', ')', ',', '/', ';'])
            .filter(flag)
            .filter(|f| !named(help, f))
            .collect();
        if !missing.is_empty() {
            self.fail(cmd, format!("flags not in `netchar {of}`: {missing:?}"));
        }
    }
}

/// Runs every command of `doc` as `table` says, after `setup`; fails on a command the table
/// lacks, on an entry no longer in the document, and on every command that did not exit as the
/// document implies.
fn check(doc: &'static str, table: &[(&str, Do)], setup: &[&str]) {
    let started = Instant::now();
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let found = commands(&text);
    let mut ctx = Ctx::new(doc);
    // What docs/report.md's screenshot commands expect where they run: the repository's crates/
    // (its fixtures) and a docs/ to write into.
    std::os::unix::fs::symlink(root().join("crates"), ctx.dir.path().join("crates")).unwrap();
    std::fs::create_dir(ctx.dir.path().join("docs")).unwrap();
    let unknown: Vec<&String> = found.iter().filter(|c| !table.iter().any(|(t, _)| t == c)).collect();
    let stale: Vec<&str> = table.iter().map(|(t, _)| *t).filter(|t| !found.iter().any(|c| c == t)).collect();
    assert!(
        unknown.is_empty() && stale.is_empty(),
        "{doc} and crates/cli/tests/readme_commands.rs disagree.\ncommands in {doc} this test neither runs nor \
         lists (add each to the table, to run or with why not):\n{}\nentries of the table no longer in {doc}:\n{}",
        unknown.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n"),
        stale.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n"),
    );
    for cmd in setup {
        let shell = ctx.local(cmd, ctx.server.port);
        ctx.expect(&format!("(setup) {cmd}"), &shell, 0);
    }
    for cmd in &found {
        let what = table.iter().find(|(t, _)| t == cmd).unwrap().1;
        ctx.run(cmd, what);
    }
    eprintln!(
        "{doc}: {} commands run, {} listed or synopses, in {:.1} s",
        ctx.ran,
        ctx.listed,
        started.elapsed().as_secs_f64()
    );
    assert!(ctx.failures.is_empty(), "{}", ctx.failures.join("\n\n"));
}

#[test]
fn readme_commands_run_as_readme_says() {
    check("README.md", README, README_SETUP);
}

#[test]
fn usage_guide_commands_run_as_it_says() {
    check("docs/usage.md", USAGE, &[]);
}

#[test]
fn statistics_guide_commands_run_as_it_says() {
    check("docs/statistics.md", STATISTICS, &[]);
}

#[test]
fn suites_guide_synopses_name_real_flags() {
    check("docs/suites.md", SUITES, &[]);
}

#[test]
fn plans_guide_has_no_command_block() {
    check("docs/plans.md", PLANS, &[]);
}

#[test]
fn console_guide_commands_are_listed() {
    check("docs/console.md", CONSOLE, &[]);
}

#[test]
fn compatibility_guide_synopses_name_real_flags() {
    check("docs/compatibility.md", COMPATIBILITY, &[]);
}

#[test]
fn netperf_guide_commands_are_listed() {
    check("docs/netperf.md", NETPERF, &[]);
}

#[test]
fn embedded_guide_commands_run_as_it_says() {
    check("docs/embedded.md", EMBEDDED, &[]);
}

#[test]
fn history_guide_commands_are_listed() {
    check("docs/history.md", HISTORY, &[]);
}

#[test]
fn scale_out_guide_commands_run_as_it_says() {
    check("docs/scale-out.md", SCALE_OUT, &[]);
}

#[test]
fn install_guide_commands_run_as_it_says() {
    check("docs/install.md", INSTALL, &[]);
}

#[test]
fn guides_without_a_command_block_have_none() {
    for doc in NO_COMMANDS {
        check(doc, &[], &[]);
    }
}

/// Every guide in docs/ is one of those above: a new guide's commands must be run or listed.
#[test]
fn every_guide_is_checked() {
    let checked = [
        "docs/usage.md",
        "docs/statistics.md",
        "docs/suites.md",
        "docs/plans.md",
        "docs/report.md",
        "docs/console.md",
        "docs/compatibility.md",
        "docs/netperf.md",
        "docs/embedded.md",
        "docs/scale-out.md",
        "docs/install.md",
        "docs/history.md",
    ];
    let mut unchecked: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .filter(|d| !checked.contains(&d.as_str()) && !NO_COMMANDS.contains(&d.as_str()))
        .collect();
    unchecked.sort();
    assert!(unchecked.is_empty(), "guides crates/cli/tests/readme_commands.rs does not check: {unchecked:?}");
}

#[test]
fn report_guide_commands_run_as_it_says() {
    check("docs/report.md", REPORT, REPORT_SETUP);
}

/// The extraction itself: prompts, output lines, comments, continuation lines.
#[test]
fn commands_are_read_as_a_shell_reads_them() {
    let text = "```sh\n$ netchar a  b   # note\nout put\n$ netchar c 'x # y'\n```\n\n```sh\nnetchar d [-x]\n    [-y]\ncmd \\\n  --z # c\n   # only a comment\n```\n";
    assert_eq!(commands(text), ["netchar a b", "netchar c 'x # y'", "netchar d [-x] [-y]", "cmd --z"]);
}

/// A synopsis that names a flag its command lacks is a failure; one whose flags all exist is not.
#[test]
fn a_synopsis_with_a_flag_its_command_lacks_fails() {
    let mut ctx = Ctx::new("(synopsis check)");
    ctx.synopsis("netchar tcp HOST [-t SECS | -n BYTES] [-R | --bidir]");
    assert!(ctx.failures.is_empty(), "{:?}", ctx.failures);
    ctx.synopsis("netchar tcp HOST [-t SECS] [--no-such-flag]");
    assert_eq!(ctx.failures.len(), 1, "{:?}", ctx.failures);
    assert!(ctx.failures[0].contains("[\"--no-such-flag\"]"), "{:?}", ctx.failures);
}
