//! CPU use and host description around a test, in model types.

use netchar_model::{CpuUsage, HostInfo};
use netchar_sys::cpu::{online_cpus, HostTimes, ProcessTimes};
use std::time::{Instant, SystemTime};

/// Snapshots taken when a test starts; [`CpuMeter::finish`] turns them into percentages.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    process: ProcessTimes,
    host: HostTimes,
    started: Instant,
}

impl CpuMeter {
    /// Starts measuring now.
    pub fn start() -> Self {
        Self { process: ProcessTimes::now(), host: HostTimes::now(), started: Instant::now() }
    }

    /// CPU used since [`Self::start`]. Process figures are percent of one CPU, host figures
    /// percent of all CPUs.
    pub fn finish(&self) -> CpuUsage {
        let process = ProcessTimes::now();
        let host = HostTimes::now();
        let wall = self.started.elapsed().as_secs_f64();
        let cpus = online_cpus();
        let pct = |secs: f64| if wall > 0.0 { 100.0 * secs / wall } else { 0.0 };
        let user = process.user_seconds - self.process.user_seconds;
        let system = process.system_seconds - self.process.system_seconds;
        let host_total = host.total.saturating_sub(self.host.total) as f64;
        let host_pct = |ticks: u64| {
            if host_total > 0.0 {
                100.0 * ticks as f64 / host_total
            } else {
                0.0
            }
        };
        CpuUsage {
            user_pct: pct(user),
            system_pct: pct(system),
            total_pct: pct(user + system),
            total_pct_of_all_cpus: pct(user + system) / f64::from(cpus),
            host_busy_pct: host_pct(host.busy.saturating_sub(self.host.busy)),
            host_softirq_pct: host_pct(host.softirq.saturating_sub(self.host.softirq)),
            user_seconds: user,
            system_seconds: system,
            wall_seconds: wall,
            cpus,
            idle_pct: None,
            background_load_pct: None,
        }
    }
}

/// This machine, for the result's `host` field.
pub fn host_info() -> HostInfo {
    let (hostname, kernel, cpu_model, cores) = netchar_sys::host::describe();
    HostInfo { hostname, kernel, cpu_model, cores, interfaces: interfaces(), sysctls: sysctls(), identity: None }
}

/// Sysctls that change what a test measures.
const SYSCTLS: &[&str] = &[
    "net/ipv4/tcp_congestion_control",
    "net/core/default_qdisc",
    "net/core/rmem_max",
    "net/core/wmem_max",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
    "net/core/busy_read",
    "net/core/busy_poll",
    "net/core/netdev_max_backlog",
];

fn sysctls() -> std::collections::BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/{k}")).ok()?;
            Some((k.replace('/', "."), v.split_whitespace().collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn interfaces() -> Vec<netchar_model::NicInfo> {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
    let mut nics: Vec<netchar_model::NicInfo> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "lo")
        .map(|name| {
            let base = std::path::Path::new("/sys/class/net").join(&name);
            let read = |f: &str| std::fs::read_to_string(base.join(f)).ok().map(|s| s.trim().to_string());
            let driver = std::fs::read_link(base.join("device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                .or_else(|| {
                    read("uevent").and_then(|u| u.lines().find_map(|l| l.strip_prefix("DEVTYPE=").map(str::to_string)))
                });
            netchar_model::NicInfo {
                name,
                driver,
                // Drivers without a speed answer -1 or an error.
                speed_mbps: read("speed").and_then(|s| s.parse::<i64>().ok()).filter(|&s| s > 0).map(|s| s as u64),
                mtu: read("mtu").and_then(|s| s.parse().ok()),
            }
        })
        .collect();
    nics.sort_by(|a, b| a.name.cmp(&b.name));
    nics
}

/// Now as RFC 3339 UTC, seconds precision.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
