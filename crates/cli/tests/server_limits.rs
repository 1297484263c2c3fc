//! Server limits, `--config` and pre-shared-key authentication, end to end on loopback: each
//! refusal comes before any traffic, names the limit and what to ask for instead.

#[path = "support/loopback.rs"]
mod common;

use common::*;
use std::io::Write;

fn key_file(dir: &std::path::Path, name: &str, lines: &str) -> String {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(lines.as_bytes()).unwrap();
    path.to_string_lossy().into_owned()
}

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("netchar-limits-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn authentication_admits_only_holders_of_a_key_and_binds_their_data_streams() {
    let dir = tmpdir("auth");
    let server_keys = key_file(&dir, "server.keys", "# lab\nalice:0123456789abcdef0123\nci:fedcba9876543210fedc\n");
    let good = key_file(&dir, "ci.key", "ci:fedcba9876543210fedc\n");
    let wrong = key_file(&dir, "wrong.key", "ci:fedcba9876543210XXXX\n");
    let s = Server::start(&["--psk-file", &server_keys]);
    let port = s.port.to_string();
    assert!(s.banner.contains("tests only for the 2 user(s)"), "{}", s.banner);
    let none = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "1M"]);
    assert_eq!(none.code, 2);
    assert!(none.stderr.contains("requires authentication") && none.stderr.contains("--psk-file"), "{}", none.stderr);
    assert_eq!(none.stderr.trim().lines().count(), 1, "{}", none.stderr);
    let bad = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "1M", "--psk-file", &wrong]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("authentication failed for user \"ci\""), "{}", bad.stderr);
    // TCP streams carry their tag in the data hello, UDP streams in the confirm datagram.
    let r = tcp_json(&s, "127.0.0.1", &["-n", "10M", "-P", "2", "-i", "0", "--psk-file", &good]);
    let (sent, got) = check_flow(&r, "up", 2);
    assert_eq!(sent, got);
    let r = client_json("udp", &s, "127.0.0.1", &["-b", "10M", "-t", "1", "-R", "--psk-file", &good]);
    let down = &r["summary"]["down"];
    assert!(u(&down["receiver"]["packets"]) > 0, "{down}");
    let lines = s.log_lines(std::time::Duration::from_secs(1));
    assert!(lines.iter().any(|l| l.contains("user ci")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("authentication failed")), "{lines:?}");
    // A client with a key refuses a server that cannot prove it holds the key.
    let open = Server::start(&[]);
    assert!(open.banner.contains("anyone who reaches this port can run tests"), "{}", open.banner);
    let run = netchar(&["tcp", "127.0.0.1", "-p", &open.port.to_string(), "-n", "1M", "--psk-file", &good]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("does not use authentication"), "{}", run.stderr);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn limits_refuse_before_traffic_and_name_what_to_ask_for() {
    let s = Server::start(&["--max-duration", "2", "--max-rate", "50M", "--max-streams", "2"]);
    let port = s.port.to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["tcp", "127.0.0.1", "-p", &port, "-t", "5", "-b", "1M"], "ask for -t 2 or less"),
        (&["tcp", "127.0.0.1", "-p", &port, "-t", "1"], "--max-rate"),
        (&["udp", "127.0.0.1", "-p", &port, "-t", "1", "-b", "80M"], "--max-rate"),
        (&["udp", "127.0.0.1", "-p", &port, "-t", "1", "-b", "1M", "-P", "3"], "--max-streams"),
    ];
    for (args, want) in cases {
        let run = netchar(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
        assert!(!run.stdout.contains("sender"), "{args:?} ran traffic: {}", run.stdout);
    }
    let r = client_json("udp", &s, "127.0.0.1", &["-b", "40M", "-t", "1", "-P", "2"]);
    assert!(u(&r["summary"]["up"]["receiver"]["packets"]) > 0);
}

#[test]
fn byte_count_tests_stop_at_max_duration_with_the_figures_so_far() {
    let s = Server::start(&["--max-duration", "1", "--max-rate", "10M"]);
    // 100 MB at 8 Mbit/s would take 100 s: the server stops it after its 1 s (+ margin).
    let port = s.port.to_string();
    let run = netchar(&["tcp", "127.0.0.1", "-p", &port, "-n", "100M", "-b", "8M", "-i", "0", "--json"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--max-duration"), "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let got = u(&v["summary"]["up"]["receiver"]["total_bytes"]);
    assert!(got > 0 && got < 100_000_000, "received {got}");
}

#[test]
fn settings_come_from_a_config_file_and_flags_win() {
    let dir = tmpdir("config");
    let cfg = key_file(&dir, "server.toml", "max-streams = 1\nmax-duration = 3\nidle-timeout = \"4\"\n");
    let s = Server::start(&["--config", &cfg]);
    assert!(s.banner.contains("1 streams per test") && s.banner.contains("3 s per test"), "{}", s.banner);
    let run = netchar(&["tcp", "127.0.0.1", "-p", &s.port.to_string(), "-t", "1", "-P", "2"]);
    assert!(run.stderr.contains("--max-streams"), "{}", run.stderr);
    drop(s);
    let s = Server::start(&["--config", &cfg, "--max-streams", "4"]);
    assert!(s.banner.contains("4 streams per test"), "{}", s.banner);
    let bad = key_file(&dir, "bad.toml", "max-strems = 1\n");
    let run = netchar(&["server", "--config", &bad]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("max-strems"), "{}", run.stderr);
    let run = netchar(&["server", "--config", "/dev/zero"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    let _ = std::fs::remove_dir_all(dir);
}
