//! The settings of this host that shape what a test measures, for the result and for
//! `netchar compare` (issue 23): the kernel's command line, each interface's driver, firmware,
//! offloads and interrupt coalescing (ethtool), and the CPU frequency governors.
//!
//! What cannot be read is absent, with why: loopback has no driver information, veth has no
//! coalescing, and most VMs have no CPU frequency scaling. Interfaces are those of the calling
//! thread's network namespace.

use crate::ethtool::Ethtool;
use netchar_model::{HostIdentity, InterfaceIdentity};
use std::collections::BTreeMap;
use std::path::Path;

/// This host's identity, with `interfaces` (those a test uses) described.
pub fn describe(interfaces: &[&str]) -> HostIdentity {
    let mut id = HostIdentity::default();
    match std::fs::read_to_string("/proc/cmdline") {
        Ok(line) => id.kernel_cmdline = Some(line.trim().to_string()),
        Err(e) => _ = id.unavailable.insert("kernel_cmdline".into(), format!("/proc/cmdline: {e}")),
    }
    match cpu_governors(Path::new("/sys/devices/system/cpu")) {
        Ok(g) => id.cpu_governors = g,
        Err(why) => _ = id.unavailable.insert("cpu_governors".into(), why),
    }
    match Ethtool::open() {
        Ok(eth) => id.interfaces = interfaces.iter().map(|name| interface(&eth, name)).collect(),
        Err(e) => _ = id.unavailable.insert("interfaces".into(), format!("cannot open a socket for ethtool: {e}")),
    }
    id
}

/// One interface's driver and settings.
fn interface(eth: &Ethtool, name: &str) -> InterfaceIdentity {
    let mut nic = InterfaceIdentity { name: name.to_string(), ..Default::default() };
    let given = |s: String| (!s.is_empty()).then_some(s);
    match eth.driver_info(name) {
        Ok(d) => {
            nic.driver = given(d.driver);
            nic.driver_version = given(d.version);
            nic.firmware_version = given(d.firmware);
            nic.bus_info = given(d.bus_info);
        }
        Err(e) => _ = nic.unavailable.insert("driver".into(), e.to_string()),
    }
    match eth.features(name) {
        Ok(features) => {
            nic.offloads =
                features.into_iter().filter(|f| f.available || f.active).map(|f| (f.name, f.active)).collect();
        }
        Err(e) => _ = nic.unavailable.insert("offloads".into(), e.to_string()),
    }
    match eth.coalesce(name) {
        Ok(c) => nic.coalesce = c.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        Err(e) => _ = nic.unavailable.insert("coalesce".into(), e.to_string()),
    }
    nic
}

/// Governor → CPUs running it, from `DIR/cpuN/cpufreq/scaling_governor`.
fn cpu_governors(dir: &Path) -> Result<BTreeMap<String, u32>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut governors = BTreeMap::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_cpu = name.to_str().and_then(|n| n.strip_prefix("cpu")).is_some_and(|n| n.parse::<u32>().is_ok());
        if !is_cpu {
            continue;
        }
        if let Ok(g) = std::fs::read_to_string(entry.path().join("cpufreq/scaling_governor")) {
            *governors.entry(g.trim().to_string()).or_insert(0) += 1;
        }
    }
    if governors.is_empty() {
        return Err(format!(
            "no CPU frequency scaling ({}/cpu*/cpufreq absent): a VM, or a kernel without cpufreq",
            dir.display()
        ));
    }
    Ok(governors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn governors_are_counted_and_their_absence_explained() {
        let dir = std::env::temp_dir().join(format!("netchar-cpufreq-{}", std::process::id()));
        for (cpu, governor) in [("cpu0", "performance"), ("cpu1", "performance"), ("cpu2", "schedutil")] {
            std::fs::create_dir_all(dir.join(cpu).join("cpufreq")).unwrap();
            std::fs::write(dir.join(cpu).join("cpufreq/scaling_governor"), format!("{governor}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.join("cpufreq")).unwrap(); // not a CPU
        let g = cpu_governors(&dir).unwrap();
        assert_eq!(g, [("performance".to_string(), 2), ("schedutil".to_string(), 1)].into());
        std::fs::remove_dir_all(dir.join("cpu0")).unwrap();
        std::fs::remove_dir_all(dir.join("cpu1")).unwrap();
        std::fs::remove_dir_all(dir.join("cpu2")).unwrap();
        assert!(cpu_governors(&dir).unwrap_err().contains("no CPU frequency scaling"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn loopback_has_offloads_but_no_driver() {
        let id = describe(&["lo"]);
        assert!(id.kernel_cmdline.is_some());
        assert_eq!(id.cpu_governors.is_empty(), id.unavailable.contains_key("cpu_governors"));
        let lo = &id.interfaces[0];
        assert_eq!(lo.name, "lo");
        assert!(lo.driver.is_none() && lo.unavailable.contains_key("driver"), "{lo:?}");
        assert!(lo.offloads.contains_key("rx-gro"), "{lo:?}");
    }
}
