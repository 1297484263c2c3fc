//! What makes two runs one series: the same method and the same machines.
//!
//! A run's method is its test spec and how it actually sent ([`netchar_model::Method`]); its
//! hash is taken over a text form of both that does not depend on serde's field order, and
//! leaves out what is measured or only shapes the display (the datagrams per send call, the
//! interval length), so that two runs of one command on one rig hash the same.
//!
//! The identities name machines, not their software: the client's host name, CPU model and
//! CPU count, and the far end's (its own report, or the address it was reached at). A new
//! kernel or a new build on the target is what a series follows across builds, so it must not
//! split it; it is kept beside the run (`host_software`, `target_software`) and shown.

use netchar_model::{TestResult, METHOD_FIELDS};
use sha2::{Digest, Sha256};

/// Fields of the method left out of its hash: measured, so they differ a little between runs
/// of one method (`compare` tolerates them the same way).
const MEASURED_METHOD_FIELDS: &[&str] = &["datagrams_per_send"];

/// A run's method as stored: its hash and the full text it was taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodKey {
    /// 16 hex digits of SHA-256 over [`MethodKey::json`]'s canonical parts.
    pub hash: String,
    /// `{"spec": ..., "method": ...}`, as the run ran.
    pub json: String,
}

/// The method of `result`, hashed.
pub fn method_key(result: &TestResult) -> MethodKey {
    let method = result.method();
    let mut spec = result.test.spec.clone();
    // How often the run printed an interval is not how it measured.
    spec.interval_seconds = 0.0;
    let spec_json = serde_json::to_value(&spec).unwrap_or_default();
    let mut hasher = Sha256::new();
    for field in METHOD_FIELDS.iter().filter(|f| !MEASURED_METHOD_FIELDS.contains(f)) {
        let value = method.field(field).unwrap_or_else(|| "-".into());
        hasher.update(format!("{field}={value}\n").as_bytes());
    }
    // serde_json's Value keeps object keys sorted: the text is canonical.
    hasher.update(b"protocol=");
    hasher.update(result.test.protocol.as_bytes());
    hasher.update(b"\nspec=");
    hasher.update(spec_json.to_string().as_bytes());
    let digest = hasher.finalize();
    let hash = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let json = serde_json::json!({ "spec": spec_json, "method": method }).to_string();
    MethodKey { hash, json }
}

/// The client's machine: host name, CPU model, CPU count.
pub fn host_identity(result: &TestResult) -> String {
    let h = &result.host;
    format!("{} ({}, {} CPUs)", h.hostname, h.cpu_model, h.cores)
}

/// The far end: its machine as it reported it, else the host it was reached at (without the
/// port, which a server started on port 0 picks anew each time).
pub fn target_identity(result: &TestResult) -> String {
    match &result.remote_host {
        Some(h) if !h.hostname.is_empty() => format!("{} ({}, {} CPUs)", h.hostname, h.cpu_model, h.cores),
        _ => {
            let remote = &result.test.remote;
            let host = remote.rsplit_once(':').map_or(remote.as_str(), |(h, _)| h);
            format!("{} ({})", host, result.test.protocol)
        }
    }
}

/// The software the client's host ran: its kernel.
pub fn host_software(result: &TestResult) -> String {
    result.host.kernel.clone()
}

/// The software the far end ran: a target's build when it reports one, else its kernel.
pub fn target_software(result: &TestResult) -> String {
    if let Some(build) = result.target.as_ref().and_then(|t| t.build.clone()) {
        return build;
    }
    result.remote_host.as_ref().map(|h| h.kernel.clone()).unwrap_or_default()
}

/// The figures `compare` knows by name ([`netchar_model::figures::METRIC_NAMES`]) that the
/// result has, by name: what the store keeps per run for queries and dashboards.
pub fn named_metrics(result: &TestResult) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (name, _) in netchar_model::figures::METRIC_NAMES {
        let Ok(path) = result.metric_path(name) else { continue };
        if let Some(v) = result.figure(&path).filter(|v| v.is_finite()) {
            out.push(((*name).to_string(), v));
        }
    }
    out
}
