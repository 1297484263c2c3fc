//! The counters of an nftables chain, read with the `nft` program (`nft -a list chain`), for
//! a test's ground truth beside its own counts (`--nft-counter`): the rule the user put where
//! the packets pass (an egress counter, the sink's drop rule) counts what the kernel saw.
//!
//! nft counts what its hook sees: a GSO super-packet is one packet whose bytes span all its
//! segments, so datagrams are `(bytes − headers × packets) / payload`.

use std::process::{Command, Stdio};

/// One rule's counter: the rule as `nft` prints it without its counter and handle, its
/// handle (which tells two identical rules apart), and what it counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCounter {
    /// The rule's handle in its chain.
    pub handle: u64,
    /// The rule's text, its `counter packets N bytes M` and `# handle H` left out.
    pub rule: String,
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// `FAMILY TABLE CHAIN` (or `TABLE CHAIN`, family `inet`), checked to be three nft names.
pub fn parse_chain(text: &str) -> Result<[String; 3], String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let named = |w: &&str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let [family, table, chain] = match words.as_slice() {
        [t, c] => ["inet", *t, *c],
        [f, t, c] => [*f, *t, *c],
        _ => return Err(format!("{text:?}: give FAMILY TABLE CHAIN (e.g. 'inet sink out') or TABLE CHAIN")),
    };
    if ![family, table, chain].iter().all(named) {
        return Err(format!("{text:?}: nft names are letters, digits, '_' and '-'"));
    }
    if !["ip", "ip6", "inet", "arp", "bridge", "netdev"].contains(&family) {
        return Err(format!("{text:?}: {family} is not an nft family (ip, ip6, inet, arp, bridge, netdev)"));
    }
    Ok([family.to_string(), table.to_string(), chain.to_string()])
}

/// The counters of every rule with a `counter` in chain `[family, table, chain]`.
pub fn chain_counters(chain: &[String; 3]) -> Result<Vec<RuleCounter>, String> {
    let out = Command::new("nft")
        .args(["-a", "list", "chain"])
        .args(chain)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run nft ({e}); install nftables"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why.lines().find(|l| !l.trim().is_empty()).unwrap_or("failed");
        return Err(format!("nft list chain {}: {why}", chain.join(" ")));
    }
    Ok(parse_listing(&String::from_utf8_lossy(&out.stdout)))
}

/// The counted rules of an `nft -a list chain` listing.
pub fn parse_listing(text: &str) -> Vec<RuleCounter> {
    let mut found = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "counter") else { continue };
        let (Some(["packets", p, "bytes", b]), Some(h)) =
            (words.get(at + 1..at + 5), words.windows(3).find(|w| w[0] == "#" && w[1] == "handle").map(|w| w[2]))
        else {
            continue;
        };
        let (Ok(packets), Ok(bytes), Ok(handle)) = (p.parse(), b.parse(), h.parse()) else { continue };
        let hash = words.iter().position(|w| *w == "#").unwrap_or(words.len());
        let rule: Vec<&str> =
            words[..hash].iter().enumerate().filter(|(i, _)| !(at..at + 5).contains(i)).map(|(_, w)| *w).collect();
        found.push(RuleCounter { handle, rule: rule.join(" "), packets, bytes });
    }
    found
}

/// What each counted rule counted between `before` and `after`, matched by handle (a rule
/// added between them counts from 0).
pub fn deltas(before: &[RuleCounter], after: &[RuleCounter]) -> Vec<RuleCounter> {
    after
        .iter()
        .map(|a| {
            let b = before.iter().find(|b| b.handle == a.handle);
            RuleCounter {
                packets: a.packets.saturating_sub(b.map_or(0, |b| b.packets)),
                bytes: a.bytes.saturating_sub(b.map_or(0, |b| b.bytes)),
                ..a.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTING: &str = "table inet sink {
	chain out {
		type filter hook postrouting priority filter; policy accept;
		udp dport 9000 counter packets 12 bytes 4096 # handle 2
		ip daddr 10.0.0.2 counter packets 3 bytes 120 drop # handle 3
		udp dport 53 accept # handle 4
	}
}
";

    #[test]
    fn a_listing_gives_each_counted_rule() {
        let rules = parse_listing(LISTING);
        assert_eq!(
            rules,
            [
                RuleCounter { handle: 2, rule: "udp dport 9000".into(), packets: 12, bytes: 4096 },
                RuleCounter { handle: 3, rule: "ip daddr 10.0.0.2 drop".into(), packets: 3, bytes: 120 },
            ]
        );
        let later = parse_listing(&LISTING.replace("packets 12 bytes 4096", "packets 20 bytes 5000"));
        let d = deltas(&rules, &later);
        assert_eq!((d[0].packets, d[0].bytes, d[1].packets), (8, 904, 0));
    }

    #[test]
    fn chains_are_named_in_nft_words() {
        assert_eq!(parse_chain("sink out").unwrap(), ["inet", "sink", "out"]);
        assert_eq!(parse_chain(" ip6 t c ").unwrap(), ["ip6", "t", "c"]);
        assert!(parse_chain("inet t").unwrap()[0] == "inet");
        assert!(parse_chain("t").unwrap_err().contains("FAMILY TABLE CHAIN"));
        assert!(parse_chain("inet t c;reboot").is_err());
        assert!(parse_chain("ipx t c").unwrap_err().contains("not an nft family"));
    }
}
