//! Comparisons hold the method constant: `compare` and `--baseline` refuse two sets of runs
//! that sent or received differently (netchar_model::method) in anything the user did not
//! name with `--accept-difference`, and say in one line which fields differ.

use netchar_model::{Method, MethodDifference, METHOD_FIELDS};

/// `--accept-difference` values (repeatable, comma-separated) as field names of
/// [`Method`]; an unknown name is an error that lists the known ones.
pub(crate) fn accepted_fields(values: &[String]) -> Result<Vec<&'static str>, String> {
    let mut out = Vec::new();
    for name in values.iter().flat_map(|v| v.split(',')).map(str::trim).filter(|n| !n.is_empty()) {
        let name = name.replace('-', "_");
        let Some(&field) = METHOD_FIELDS.iter().find(|&&f| f == name) else {
            return Err(format!(
                "--accept-difference {name}: not a field of a run's method; use one of {}",
                METHOD_FIELDS.join(", ")
            ));
        };
        if !out.contains(&field) {
            out.push(field);
        }
    }
    Ok(out)
}

/// What a check of sets of runs found: the differences the user accepted (to be said, not
/// refused) and, when others remain, the one line that refuses the comparison.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Verdict {
    /// `field: left vs right` of each accepted difference, once each.
    pub(crate) accepted: Vec<String>,
    /// The refusal: which set differs from which, in which fields, and what to do.
    pub(crate) refused: Option<String>,
}

/// Checks every run of every set against the first run of the first set that has one.
/// `sets` are (name, methods of its runs); a set without methods (numbers) is not checked.
pub(crate) fn check(sets: &[(String, Vec<Method>)], accepted: &[&str]) -> Verdict {
    let mut verdict = Verdict::default();
    let Some((base_name, base)) = sets.iter().find(|(_, m)| !m.is_empty()) else { return verdict };
    let reference = &base[0];
    let mut refusals = Vec::new();
    let mut refused_fields: Vec<&'static str> = Vec::new();
    let mut hint_checksum = false;
    for (name, methods) in sets {
        let mut differences: Vec<MethodDifference> = Vec::new();
        for m in methods {
            for d in reference.differences(m) {
                if !differences.iter().any(|x| x.field == d.field && x.right == d.right) {
                    differences.push(d);
                }
            }
        }
        let (ok, refused): (Vec<_>, Vec<_>) = differences.into_iter().partition(|d| accepted.contains(&d.field));
        for d in ok {
            let line = d.to_string();
            if !verdict.accepted.contains(&line) {
                verdict.accepted.push(line);
            }
        }
        if refused.is_empty() {
            continue;
        }
        let fields: Vec<String> = refused.iter().map(ToString::to_string).collect();
        for d in &refused {
            if !refused_fields.contains(&d.field) {
                refused_fields.push(d.field);
            }
        }
        hint_checksum |= refused.iter().any(|d| d.field == "gso")
            && methods.iter().chain(std::iter::once(reference)).any(|m| m.udp_checksum == Some(false));
        refusals.push(if name == base_name {
            format!("the runs of {name} sent differently: {}", fields.join("; "))
        } else {
            format!("{name} sent differently from {base_name}: {}", fields.join("; "))
        });
    }
    if refusals.is_empty() {
        return verdict;
    }
    let mut line = refusals.join("; and ");
    if hint_checksum {
        line.push_str(
            ". --no-udp-checksum turns GSO off (the kernel refuses GSO without checksums): its like-for-like \
             reference is a run with --no-gso",
        );
    }
    line.push_str(&format!(
        ". Make both sides the same, or name what you set out to compare with --accept-difference {}",
        refused_fields.join(",")
    ));
    verdict.refused = Some(line);
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(checksum: bool, gso: bool, per_send: f64) -> Method {
        Method {
            protocol: "netchar".into(),
            test: "udp".into(),
            direction: "up".into(),
            streams: 1,
            block_bytes: 64,
            payload: "constant".into(),
            udp_checksum: Some(checksum),
            gso: Some(gso),
            datagrams_per_send: Some(per_send),
            paced: Some(false),
            busy_poll: "sleep".into(),
            cpu_placement: "unpinned".into(),
            ip_options: "none".into(),
            server_load: "none".into(),
            ..Method::default()
        }
    }

    #[test]
    fn the_checksum_experiment_is_refused_naming_gso_and_its_reference() {
        let sets = vec![
            ("A".to_string(), vec![udp(true, true, 512.0), udp(true, true, 500.0)]),
            ("B".to_string(), vec![udp(false, false, 64.0), udp(false, false, 64.0)]),
        ];
        let v = check(&sets, &[]);
        assert_eq!(
            v.refused.as_deref(),
            Some(
                "B sent differently from A: udp_checksum: on vs off; gso: on vs off; datagrams_per_send: 512 vs 64. \
                 --no-udp-checksum turns GSO off (the kernel refuses GSO without checksums): its like-for-like \
                 reference is a run with --no-gso. Make both sides the same, or name what you set out to compare \
                 with --accept-difference udp_checksum,gso,datagrams_per_send"
            )
        );
        assert!(v.accepted.is_empty());
        // Accepting the checksum alone still refuses the GSO difference it brought.
        let v = check(&sets, &["udp_checksum"]);
        assert_eq!(v.accepted, ["udp_checksum: on vs off"]);
        assert!(v.refused.unwrap().contains("gso: on vs off; datagrams_per_send: 512 vs 64"));
    }

    #[test]
    fn like_for_like_sets_pass_and_an_accepted_difference_is_said() {
        // --no-gso against --no-gso --no-udp-checksum: the checksum is the one difference.
        let sets = vec![
            ("A".to_string(), vec![udp(true, false, 64.0), udp(true, false, 60.0)]),
            ("B".to_string(), vec![udp(false, false, 64.0)]),
            ("numbers.txt".to_string(), vec![]),
        ];
        let v = check(&sets, &["udp_checksum"]);
        assert_eq!(v, Verdict { accepted: vec!["udp_checksum: on vs off".into()], refused: None });
        assert!(check(&sets, &[]).refused.unwrap().starts_with("B sent differently from A: udp_checksum: on vs off."));
    }

    #[test]
    fn runs_of_one_set_that_differ_are_named() {
        let sets = vec![("A".to_string(), vec![udp(true, true, 512.0), udp(true, false, 64.0)])];
        let refused = check(&sets, &[]).refused.unwrap();
        assert!(refused.starts_with("the runs of A sent differently: gso: on vs off; datagrams_per_send: 512 vs 64."));
        assert!(!refused.contains("--no-gso"));
    }

    #[test]
    fn a_measured_batch_within_twice_is_the_same_method() {
        let sets =
            vec![("A".to_string(), vec![udp(true, true, 512.0)]), ("B".to_string(), vec![udp(true, true, 300.0)])];
        assert_eq!(check(&sets, &[]), Verdict::default());
    }

    #[test]
    fn accepted_names_are_checked() {
        assert_eq!(
            accepted_fields(&["gso,udp-checksum".into(), "streams".into()]).unwrap(),
            ["gso", "udp_checksum", "streams"]
        );
        let e = accepted_fields(&["checksum".into()]).unwrap_err();
        assert!(
            e.starts_with("--accept-difference checksum: not a field of a run's method; use one of protocol, test,")
        );
    }
}
