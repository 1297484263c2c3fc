//! What every command's flag parsing shares: the one-line usage error (exit status 2) and the
//! parsers that modules below the plan (hooks) need too.

/// A usage error: one line, exit status 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::error::Error for UsageError {}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Err(UsageError(msg))`.
pub(crate) fn usage<T>(msg: String) -> Result<T, UsageError> {
    Err(UsageError(msg))
}

/// A number of seconds given to `flag`.
pub(crate) fn seconds(flag: &str, value: &str) -> Result<f64, UsageError> {
    match value.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => usage(format!("{flag} {value}: not a number of seconds")),
    }
}

/// `--xdp IFACE[:QUEUE]`, checked here and now: the interface exists and this process may open
/// an AF_XDP socket (root), each refusal one line with its reason. A queue the interface
/// lacks is refused by the sender's bind, as the stream's error.
pub(crate) fn xdp_send(value: &str) -> Result<netchar_model::XdpSend, UsageError> {
    let (interface, queue) = match value.rsplit_once(':') {
        Some((i, q)) => match q.parse::<u32>() {
            Ok(q) => (i, q),
            Err(_) => return usage(format!("--xdp {value}: {q} is not a queue number; expected IFACE or IFACE:QUEUE")),
        },
        None => (value, 0),
    };
    if interface.is_empty() {
        return usage(format!("--xdp {value:?}: no interface; expected IFACE or IFACE:QUEUE, e.g. --xdp eth0"));
    }
    netchar_sys::xdp::XdpTx::check(interface).map_err(|e| UsageError(e.to_string()))?;
    Ok(netchar_model::XdpSend { interface: interface.to_string(), queue, live: false })
}

/// `--xdp` sends from this client's own sender, through netchar's datagram format: not from a
/// server (`-R`, `--bidir`), nor in a peer tool's format.
pub(crate) fn xdp_fits(direction: netchar_model::Direction, protocol: &str) -> Result<(), UsageError> {
    if direction != netchar_model::Direction::Up {
        return usage("--xdp: sends from this client only; not with -R or --bidir".into());
    }
    if !matches!(protocol, "auto" | "netchar" | "sink") {
        return usage(format!("--xdp: with netchar's own server or --proto sink, not --proto {protocol}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_values_and_directions_are_refused_in_one_line_naming_the_fix() {
        let e = xdp_send("eth0:x").unwrap_err().to_string();
        assert_eq!(e, "--xdp eth0:x: x is not a queue number; expected IFACE or IFACE:QUEUE");
        let e = xdp_send(":1").unwrap_err().to_string();
        assert!(e.starts_with("--xdp \":1\": no interface"), "{e}");
        let e = xdp_send("nosuch0:1").unwrap_err().to_string();
        assert_eq!(e, "--xdp nosuch0: no such interface in this network namespace");
        let e = xdp_fits(netchar_model::Direction::Down, "netchar").unwrap_err().to_string();
        assert_eq!(e, "--xdp: sends from this client only; not with -R or --bidir");
        let e = xdp_fits(netchar_model::Direction::Up, "iperf3").unwrap_err().to_string();
        assert_eq!(e, "--xdp: with netchar's own server or --proto sink, not --proto iperf3");
        assert!(xdp_fits(netchar_model::Direction::Up, "sink").is_ok());
    }
}
