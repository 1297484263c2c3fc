//! What machine this is: host name, kernel, CPU model, CPUs.

use std::ffi::CStr;

/// Host name, kernel (`sysname release`), CPU model, CPUs online.
pub fn describe() -> (String, String, String, u32) {
    // SAFETY: utsname is plain old data; uname fills it with NUL-terminated strings.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live utsname.
    let ok = unsafe { libc::uname(&mut u) } == 0;
    let field = |f: &[libc::c_char]| -> String {
        // SAFETY: uname NUL-terminates every field within its array (zeroed above otherwise).
        unsafe { CStr::from_ptr(f.as_ptr()) }.to_string_lossy().into_owned()
    };
    let (hostname, kernel) = if ok {
        (field(&u.nodename), format!("{} {}", field(&u.sysname), field(&u.release)))
    } else {
        (String::new(), String::new())
    };
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    (hostname, kernel, cpu_model, crate::cpu::online_cpus())
}
