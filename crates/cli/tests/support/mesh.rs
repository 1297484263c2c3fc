//! The schedule checks both mesh tests (processes as nodes, namespaces as nodes) make on the
//! Jobs' result lines.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// No node is in two tests at once, by the plan (within a round each node is at one end of one
/// test at most) and as the tests ran (the tests a node took part in, either end, never
/// overlapped in time); each node of `names` took part in `tests_per_node` tests. Returns how
/// many rounds the lines name.
pub(crate) fn assert_no_node_in_two_tests_at_once(lines: &[Value], names: &[&str], tests_per_node: usize) -> usize {
    let mut per_round: HashMap<u64, Vec<&str>> = HashMap::new();
    for l in lines {
        let round = l["round"].as_u64().unwrap();
        per_round.entry(round).or_default().extend([l["source"].as_str().unwrap(), l["destination"].as_str().unwrap()]);
    }
    for (round, busy) in &per_round {
        let unique: HashSet<&&str> = busy.iter().collect();
        assert_eq!(unique.len(), busy.len(), "a node in two tests in round {round}: {busy:?}");
    }
    for name in names {
        let mut spans: Vec<(f64, f64)> = lines
            .iter()
            .filter(|l| l["source"] == *name || l["destination"] == *name)
            .map(|l| (l["started_unix"].as_f64().unwrap(), l["ended_unix"].as_f64().unwrap()))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(spans.len(), tests_per_node, "{name}: tests as source and as destination");
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "{name} was in two tests at once: {spans:?}");
        }
    }
    per_round.len()
}
