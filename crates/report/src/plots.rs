//! Which plots a set of results makes, as [`Chart`]s ([`crate::chart`] draws them):
//!
//! - per result with intervals: throughput over time, per stream and summed per flow;
//! - per UDP rate sweep (`suite bwsweep`, `--find-max-rate`: one set of UDP results at two or
//!   more offered rates): received rate and loss % against offered rate, both directions, the
//!   knee (the lowest offered rate that lost datagrams) marked; with two or more sweeps, also
//!   all of them in one chart, named by set;
//! - per request/response result: latency percentiles and their CDF, idle against under load
//!   where the result has both (`rr --under-load`), the CDF from the histogram's points
//!   (`latency_cdf`) where the result has them;
//! - per latency-under-load result: each load flow's rate and each probe's latency over time;
//! - per set at two or more block sizes (`suite netio`, `suite sizes`): received rate
//!   against block size, per protocol and direction;
//! - over sets of repeated runs (`--repeat`, `--save` directories): a box/strip plot of each
//!   set's throughput with the 95% confidence interval of its mean.
//!
//! A set is what one file or directory held: the label up to `#N` for an array, else the
//! directory of the file (a `--save` directory), else the file.

use crate::chart::{Axis, BoxSet, Chart, Marker, Series, Shape};
use crate::Saved;
use netchar_model::{Flow, Role, RrFigures, TestKind, TestResult, UdpRate};
use std::collections::BTreeMap;

/// The confidence of the intervals in compare plots, percent.
pub const CONFIDENCE: f64 = 95.0;

/// A unit that keeps the axis numbers short: (divisor, name).
pub fn rate_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e9 {
        (1e9, "Gbit/s")
    } else if max >= 1e6 {
        (1e6, "Mbit/s")
    } else if max >= 1e3 {
        (1e3, "kbit/s")
    } else {
        (1.0, "bit/s")
    }
}

/// Letters, digits and `-` of `text`, everything else `_`: a file name part.
pub fn slug(text: &str) -> String {
    let base = text.trim_end_matches('/').rsplit('/').next().unwrap_or(text);
    base.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

/// The set a result belongs to (see the module documentation).
pub fn set_of(label: &str) -> String {
    if let Some((file, _)) = label.rsplit_once('#') {
        return file.to_string();
    }
    match label.rsplit_once('/') {
        Some((dir, _)) if !dir.is_empty() => dir.to_string(),
        _ => label.to_string(),
    }
}

/// The sets in order of first appearance, each with its results.
fn sets(results: &[Saved]) -> Vec<(String, Vec<&Saved>)> {
    let mut out: Vec<(String, Vec<&Saved>)> = Vec::new();
    for s in results {
        let name = set_of(&s.label);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(s),
            None => out.push((name, vec![s])),
        }
    }
    out
}

/// The throughput series of one result: per flow, each stream as its receiver measured it
/// (its sender where no receiver intervals exist, as with a peer that reports none), then
/// the sum when the flow has more than one stream. Points are (seconds, bit/s), drawn as
/// steps: each interval's start and end at its rate.
pub fn throughput_series(r: &TestResult) -> Vec<Series> {
    let mut out = Vec::new();
    for flow in [Flow::Up, Flow::Down] {
        let has = |role: Role| r.intervals.iter().any(|iv| iv.streams.iter().any(|s| s.flow == flow && s.role == role));
        let role = if has(Role::Receiver) {
            Role::Receiver
        } else if has(Role::Sender) {
            Role::Sender
        } else {
            continue;
        };
        let mut ids: Vec<u32> = r
            .intervals
            .iter()
            .flat_map(|iv| &iv.streams)
            .filter(|s| s.flow == flow && s.role == role)
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        for &id in &ids {
            let points = r
                .intervals
                .iter()
                .flat_map(|iv| &iv.streams)
                .filter(|s| s.id == id && s.flow == flow && s.role == role)
                .flat_map(|s| [(s.sample.start, s.sample.bits_per_second), (s.sample.end, s.sample.bits_per_second)])
                .collect();
            out.push(Series::line(format!("{} stream {id}", flow.name()), points));
        }
        if ids.len() > 1 {
            let points = r
                .intervals
                .iter()
                .filter_map(|iv| {
                    iv.sum.iter().find(|s| s.flow == flow && s.role == role).map(|s| (iv, s.bits_per_second))
                })
                .flat_map(|(iv, b)| [(iv.start, b), (iv.end, b)])
                .collect();
            let mut sum = Series::line(format!("{} sum", flow.name()), points);
            sum.emphasis = true;
            out.push(sum);
        }
    }
    out
}

fn scale(series: &mut [Series], div: f64, right: bool) {
    for s in series.iter_mut().filter(|s| s.right_axis == right) {
        for p in &mut s.points {
            p.1 /= div;
        }
    }
}

fn max_y(series: &[Series]) -> f64 {
    series.iter().filter(|s| !s.right_axis).flat_map(|s| &s.points).map(|p| p.1).fold(0.0, f64::max)
}

/// The throughput-over-time chart of one TCP or UDP result (None without intervals).
pub fn throughput_chart(index: usize, s: &Saved) -> Option<Chart> {
    // A request/response test's bytes are its requests: its plots are the latency ones.
    if s.result.test.spec.kind == TestKind::Rr {
        return None;
    }
    let mut series = throughput_series(&s.result);
    if series.is_empty() {
        return None;
    }
    let (div, unit) = rate_unit(max_y(&series));
    scale(&mut series, div, false);
    let r = &s.result;
    let markers = console_markers(r, &series);
    Some(Chart {
        stem: format!("{:03}-{}", index + 1, slug(&s.label)),
        title: format!("{}: {} {} throughput over time", s.label, r.test.protocol, r.test.spec.kind.name()),
        x: Axis::linear("time (s)"),
        y: Axis::linear(format!("throughput ({unit})")),
        y2: None,
        series,
        markers,
        boxes: vec![],
    })
}

/// At most this many console markers on a throughput chart: their labels stack down the
/// chart, and more would run off it. The HTML report's console table lists every line.
pub const CONSOLE_MARKERS: usize = 8;

/// The target's flagged console lines as markers on the throughput chart's time axis: those
/// within the chart's time span, the first [`CONSOLE_MARKERS`] of them, labelled with their
/// flag.
pub fn console_markers(r: &TestResult, series: &[Series]) -> Vec<Marker> {
    let Some(console) = &r.console else { return vec![] };
    let xs = series.iter().flat_map(|s| &s.points).map(|p| p.0);
    let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    console
        .flagged()
        .filter(|l| l.t >= lo && l.t <= hi)
        .take(CONSOLE_MARKERS)
        .filter_map(|l| l.flag.map(|f| Marker { x: l.t, label: format!("console: {}", f.name()) }))
        .collect()
}

/// The receiving end's rate of a result, all flows added.
pub fn received_bps(r: &TestResult) -> f64 {
    [Flow::Up, Flow::Down].iter().filter_map(|&f| r.summary.flow(f)).map(|f| f.receiver.bits_per_second).sum()
}

fn offered_bps(r: &TestResult) -> Option<f64> {
    match r.test.spec.udp.as_ref()?.rate {
        UdpRate::BitsPerSecond(b) if r.test.spec.kind == TestKind::Udp => Some(b as f64),
        _ => None,
    }
}

/// One sweep point of one flow: (offered bit/s, received bit/s, loss %).
pub type SweepPoint = (f64, f64, f64);

/// The sweep points of one flow, by offered rate.
fn sweep_points(set: &[&Saved], flow: Flow) -> Vec<SweepPoint> {
    let mut pts: Vec<SweepPoint> = set
        .iter()
        .filter_map(|s| {
            let offered = offered_bps(&s.result)?;
            let f = s.result.summary.flow(flow)?;
            let loss = f.receiver.udp_received.as_ref().map_or(0.0, |u| u.loss_percent);
            Some((offered, f.receiver.bits_per_second, loss))
        })
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The knee of a sweep: the lowest offered rate that lost more than `loss_percent` of its
/// datagrams (`--knee-loss`; [`crate::sweep::knee_loss_of`] gives a saved sweep's).
pub fn knee(points: &[SweepPoint], loss_percent: f64) -> Option<f64> {
    points.iter().find(|p| p.2 > loss_percent).map(|p| p.0)
}

/// The sweep chart of a set, when it holds UDP results at two or more offered rates.
pub fn sweep_chart(name: &str, set: &[&Saved]) -> Option<Chart> {
    sweeps_chart(
        format!("sweep-{}", slug(name)),
        format!("{name}: UDP rate sweep, received rate and loss against offered rate"),
        &[(name.to_string(), set.to_vec())],
        2,
    )
}

/// Every chart of a `--find-max-rate` search's trials; when they make no sweep chart (the
/// first trial passed, or every trial ran at one rate) its received rate and loss at that
/// one offered rate anyway, so a search never leaves its plot directory empty.
pub fn search_charts(results: &[Saved]) -> Vec<Chart> {
    let mut out = charts(results);
    if !out.iter().any(|c| c.stem.starts_with("sweep")) {
        for (name, set) in sets(results) {
            out.extend(sweeps_chart(
                format!("sweep-{}", slug(&name)),
                format!("{name}: UDP rate search, received rate and loss at the offered rate"),
                &[(name.clone(), set)],
                1,
            ));
        }
    }
    out
}

/// The sweeps of several sets in one chart (before and after a change, as the i.MX6 study
/// compares kernel settings), when two or more sets are sweeps; lines named by set.
pub fn sweeps_compared_chart(results: &[Saved]) -> Option<Chart> {
    let all = sets(results);
    let sweeps: Vec<(String, Vec<&Saved>)> =
        all.into_iter().filter(|(name, set)| sweep_chart(name, set).is_some()).collect();
    if sweeps.len() < 2 {
        return None;
    }
    let names: Vec<&str> = sweeps.iter().map(|(n, _)| n.as_str()).collect();
    sweeps_chart("sweeps-compared".into(), format!("UDP rate sweeps compared: {}", names.join(", ")), &sweeps, 2)
}

/// One sweep chart over `sets`: per set and direction with `min_rates` or more offered rates,
/// the received rate (left axis) and loss % (right axis), and the knee marked.
fn sweeps_chart(stem: String, title: String, sets: &[(String, Vec<&Saved>)], min_rates: usize) -> Option<Chart> {
    let mut lines: Vec<(String, Vec<SweepPoint>, f64)> = Vec::new();
    for (name, set) in sets {
        // Each set's knee at the threshold it was swept with.
        let knee_loss = crate::sweep::knee_loss_of(set.iter().map(|s| &s.result));
        for flow in [Flow::Up, Flow::Down] {
            let p = sweep_points(set, flow);
            let mut rates: Vec<u64> = p.iter().map(|x| x.0 as u64).collect();
            rates.dedup();
            if rates.len() >= min_rates.max(1) {
                let label = if sets.len() > 1 { format!("{} {}", slug(name), flow.name()) } else { flow.name().into() };
                lines.push((label, p, knee_loss));
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let top = lines.iter().flat_map(|(_, p, _)| p).map(|p| p.0.max(p.1)).fold(0.0, f64::max);
    let (div, unit) = rate_unit(top);
    let mut series = Vec::new();
    let mut markers = Vec::new();
    let (lo, hi) =
        lines.iter().flat_map(|(_, p, _)| p).fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    series.push(Series {
        name: "received = offered".into(),
        points: vec![(lo / div, lo / div), (hi / div, hi / div)],
        shape: Shape::Reference,
        right_axis: false,
        emphasis: false,
        colour: None,
    });
    for (n, (label, p, knee_loss)) in lines.iter().enumerate() {
        series.push(Series {
            name: format!("{label} received"),
            points: p.iter().map(|x| (x.0 / div, x.1 / div)).collect(),
            shape: Shape::LineAndPoints,
            right_axis: false,
            emphasis: false,
            colour: Some(n),
        });
        series.push(Series {
            name: format!("{label} loss %"),
            points: p.iter().map(|x| (x.0 / div, x.2)).collect(),
            shape: Shape::LineAndPoints,
            right_axis: true,
            emphasis: false,
            colour: Some(n),
        });
        if let Some(k) = knee(p, *knee_loss) {
            markers.push(Marker { x: k / div, label: format!("{label} knee {} {unit}", crate::chart::tick(k / div)) });
        }
    }
    Some(Chart {
        stem,
        title,
        x: Axis::linear(format!("offered rate ({unit})")),
        y: Axis::linear(format!("received rate ({unit})")),
        y2: Some(Axis::linear("loss (%)")),
        series,
        markers,
        boxes: vec![],
    })
}

/// The block-size chart of a set, when one protocol and direction has results at two or more
/// block sizes.
pub fn block_size_chart(name: &str, set: &[&Saved]) -> Option<Chart> {
    // Request/response tests' block is their request: not a block-size point.
    let mut sizes: Vec<u64> = set
        .iter()
        .filter(|s| s.result.test.spec.kind != TestKind::Rr)
        .map(|s| s.result.test.spec.block_bytes)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 2 {
        return None;
    }
    // Per protocol and direction, the receiving end's rate at each block size.
    let mut lines: BTreeMap<(String, &'static str), Vec<(f64, f64)>> = BTreeMap::new();
    for s in set {
        let r = &s.result;
        if r.test.spec.kind == TestKind::Rr {
            continue;
        }
        for flow in [Flow::Up, Flow::Down] {
            if let Some(f) = r.summary.flow(flow) {
                lines
                    .entry((r.test.spec.kind.name().to_uppercase(), flow.name()))
                    .or_default()
                    .push((r.test.spec.block_bytes as f64, f.receiver.bits_per_second));
            }
        }
    }
    // A line at one block size is no curve: the set mixes tests (the quick characterization's
    // TCP at 128 KiB and UDP at 1472 bytes), not sizes of one test.
    if lines.values().all(|p| {
        let mut sizes: Vec<u64> = p.iter().map(|x| x.0 as u64).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes.len() < 2
    }) {
        return None;
    }
    let mut series: Vec<Series> = lines
        .into_iter()
        .map(|((kind, flow), mut p)| {
            p.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: format!("{kind} {flow}"),
                points: p,
                shape: Shape::LineAndPoints,
                right_axis: false,
                emphasis: false,
                colour: None,
            }
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let (div, unit) = rate_unit(max_y(&series));
    scale(&mut series, div, false);
    Some(Chart {
        stem: format!("blocks-{}", slug(name)),
        title: format!("{name}: received rate against block size"),
        x: Axis::log("block size (bytes)"),
        y: Axis::linear(format!("received rate ({unit})")),
        y2: None,
        series,
        markers: vec![],
        boxes: vec![],
    })
}

/// The latency figures of a request/response result: ("idle", ..) and ("under load", ..)
/// when it has both, else ("rr", ..); crr adds the connect latency.
pub fn latency_sets(r: &TestResult) -> Vec<(String, &RrFigures)> {
    let s = &r.summary;
    let mut out = Vec::new();
    match (&s.rr_idle, &s.rr_loaded) {
        (Some(idle), Some(loaded)) => {
            out.push(("idle".to_string(), idle));
            out.push(("under load".to_string(), loaded));
        }
        _ => {
            if let Some(rr) = &s.rr {
                out.push(("round trip".to_string(), rr));
            }
        }
    }
    out
}

/// The sets of a latency CDF: each probe's idle and loaded figures when the result has
/// several probes (`rr --under-load rrul`), else [`latency_sets`].
fn cdf_sets(r: &TestResult) -> Vec<(String, &RrFigures)> {
    match r.summary.under_load.as_deref() {
        Some(u) if u.probes.len() > 1 => u
            .probes
            .iter()
            .flat_map(|p| [(format!("{} idle", p.class), &p.idle), (format!("{} under load", p.class), &p.loaded)])
            .filter_map(|(name, f)| f.as_ref().map(|f| (name, f)))
            .collect(),
        _ => latency_sets(r),
    }
}

/// The CDF points of a latency set, (µs, percent): the histogram's own points where the
/// result has them, else the six percentiles.
fn cdf_points(f: &RrFigures) -> Vec<(f64, f64)> {
    if f.latency_cdf.is_empty() {
        percentiles(f).iter().map(|&(pct, us)| (us, pct)).collect()
    } else {
        f.latency_cdf.iter().map(|p| (p.us, p.quantile * 100.0)).collect()
    }
}

/// The percentile points of a latency set: (percent, µs), min at 0 and max at 100.
fn percentiles(f: &RrFigures) -> [(f64, f64); 6] {
    let l = &f.latency_us;
    [(0.0, l.min), (50.0, l.p50), (90.0, l.p90), (99.0, l.p99), (99.9, l.p999), (100.0, l.max)]
}

/// The two latency charts of a request/response result: percentiles (one category per
/// percentile) and the CDF through those percentiles, latency on a log axis.
pub fn latency_charts(index: usize, s: &Saved) -> Vec<Chart> {
    let sets = latency_sets(&s.result);
    if sets.is_empty() {
        return vec![];
    }
    let names = ["min", "p50", "p90", "p99", "p99.9", "max"];
    let stem = format!("{:03}-{}", index + 1, slug(&s.label));
    let series = |cdf: bool| -> Vec<Series> {
        let sets = if cdf { cdf_sets(&s.result) } else { sets.clone() };
        sets.iter()
            .map(|(name, f)| Series {
                name: name.clone(),
                points: if cdf {
                    cdf_points(f)
                } else {
                    percentiles(f).iter().enumerate().map(|(i, &(_, us))| (i as f64, us)).collect()
                },
                shape: if cdf && !f.latency_cdf.is_empty() { Shape::Line } else { Shape::LineAndPoints },
                right_axis: false,
                emphasis: false,
                colour: None,
            })
            .collect()
    };
    let whole = cdf_sets(&s.result).iter().all(|(_, f)| !f.latency_cdf.is_empty());
    let pct = Chart {
        stem: format!("{stem}-latency"),
        title: format!("{}: round-trip latency percentiles", s.label),
        x: Axis::categories("percentile", &names),
        y: Axis::log("round-trip latency (µs)"),
        y2: None,
        series: series(false),
        markers: vec![],
        boxes: vec![],
    };
    let cdf = Chart {
        stem: format!("{stem}-latency-cdf"),
        title: if whole {
            format!("{}: round-trip latency CDF (every round trip)", s.label)
        } else {
            format!("{}: round-trip latency CDF (through min, p50, p90, p99, p99.9, max)", s.label)
        },
        x: Axis::log("round-trip latency (µs)"),
        y: Axis::linear("transactions at or below (%)"),
        y2: None,
        series: series(true),
        markers: vec![],
        boxes: vec![],
    };
    vec![pct, cdf]
}

fn five(values: &[f64]) -> [f64; 5] {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| {
        let pos = p * (v.len() - 1) as f64;
        let (i, frac) = (pos.floor() as usize, pos.fract());
        if i + 1 < v.len() {
            v[i] + (v[i + 1] - v[i]) * frac
        } else {
            v[i]
        }
    };
    [v[0], q(0.25), q(0.5), q(0.75), v[v.len() - 1]]
}

/// Whether a set is runs of one test (same kind, direction, block size and offered rate):
/// a set to compare, not a sweep.
fn repeats(set: &[&Saved]) -> bool {
    let key = |s: &Saved| {
        let t = &s.result.test.spec;
        (t.kind, t.direction, t.block_bytes, offered_bps(&s.result).map(|b| b as u64))
    };
    set.windows(2).all(|w| key(w[0]) == key(w[1]))
}

/// Box/strip plots of the received rate of each set of repeated TCP or UDP runs, one chart
/// per protocol with at least two sets, or one set of two or more runs.
pub fn compare_charts(results: &[Saved]) -> Vec<Chart> {
    let all = sets(results);
    let mut out = Vec::new();
    for kind in [TestKind::Tcp, TestKind::Udp] {
        let chosen: Vec<(&String, Vec<f64>)> = all
            .iter()
            .filter(|(_, set)| repeats(set) && set[0].result.test.spec.kind == kind)
            .map(|(name, set)| (name, set.iter().map(|s| received_bps(&s.result)).collect::<Vec<f64>>()))
            .collect();
        if chosen.len() < 2 && chosen.iter().all(|(_, v)| v.len() < 2) {
            continue;
        }
        let top = chosen.iter().flat_map(|(_, v)| v).fold(0.0, |a: f64, &b| a.max(b));
        let (div, unit) = rate_unit(top);
        let boxes = chosen
            .into_iter()
            .map(|(name, v)| {
                let v: Vec<f64> = v.iter().map(|x| x / div).collect();
                let st = netchar_stats::compare::SetStats::of(&v).expect("a set has a result");
                BoxSet {
                    name: slug(name),
                    five: five(&v),
                    mean: st.mean,
                    ci_half: netchar_stats::compare::mean_interval(&st, CONFIDENCE),
                    values: v,
                }
            })
            .collect::<Vec<BoxSet>>();
        let names: Vec<String> = boxes.iter().map(|b| b.name.clone()).collect();
        let k = kind.name();
        out.push(Chart {
            stem: format!("compare-{k}"),
            title: format!(
                "{} sets: received rate per run, box (quartiles, extremes), mean and its {CONFIDENCE:.0}% interval (red)",
                k.to_uppercase()
            ),
            x: Axis::categories("set", &names),
            y: Axis::linear(format!("received rate ({unit})")),
            y2: None,
            series: vec![],
            markers: vec![],
            boxes,
        });
    }
    out
}

/// Latency under load over time (`rr --under-load`): each load flow's rate (left axis) and
/// each probe's median round trip per interval (right axis) on the time axis the flows and
/// probes share. None without flow or probe intervals.
pub fn under_load_time_chart(index: usize, s: &Saved) -> Option<Chart> {
    let u = s.result.summary.under_load.as_deref()?;
    let mut series = Vec::new();
    for f in &u.flows {
        for &flow in f.direction.flows() {
            let points: Vec<(f64, f64)> = f
                .intervals
                .iter()
                .filter(|iv| iv.flow == flow)
                .flat_map(|iv| [(iv.start, iv.bits_per_second), (iv.end, iv.bits_per_second)])
                .collect();
            if !points.is_empty() {
                series.push(Series::line(format!("{} {} {}", f.protocol, flow.name(), f.class), points));
            }
        }
    }
    let flows = series.len();
    for p in &u.probes {
        let points: Vec<(f64, f64)> = p.intervals.iter().map(|iv| ((iv.start + iv.end) / 2.0, iv.p50_us)).collect();
        if !points.is_empty() {
            series.push(Series {
                name: format!("{} probe p50", p.class),
                points,
                shape: Shape::LineAndPoints,
                right_axis: true,
                emphasis: false,
                colour: None,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    let (div, unit) = rate_unit(max_y(&series));
    scale(&mut series, div, false);
    Some(Chart {
        stem: format!("{:03}-{}-under-load-time", index + 1, slug(&s.label)),
        title: format!("{}: {} load flows and round-trip latency over time ({})", s.label, flows, u.load),
        x: Axis::linear("time (s)"),
        y: Axis::linear(format!("throughput ({unit})")),
        y2: Some(Axis::linear("median round trip (µs)")),
        series,
        markers: vec![],
        boxes: vec![],
    })
}

/// Every chart the results make, in a stable order: per result (throughput, latency), then
/// per set (sweeps, block sizes), then the comparisons.
pub fn charts(results: &[Saved]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (i, s) in results.iter().enumerate() {
        out.extend(throughput_chart(i, s));
        out.extend(latency_charts(i, s));
        out.extend(under_load_time_chart(i, s));
    }
    for (name, set) in sets(results) {
        out.extend(sweep_chart(&name, &set));
        out.extend(block_size_chart(&name, &set));
    }
    out.extend(sweeps_compared_chart(results));
    out.extend(compare_charts(results));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_follow_files_arrays_and_directories() {
        assert_eq!(set_of("runs.json#3"), "runs.json");
        assert_eq!(set_of("base/20261123T081245Z-tcp-001.json"), "base");
        assert_eq!(set_of("tcp.json"), "tcp.json");
    }

    #[test]
    fn quartiles_interpolate() {
        assert_eq!(five(&[4.0, 1.0, 3.0, 2.0, 5.0]), [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(five(&[1.0, 2.0]), [1.0, 1.25, 1.5, 1.75, 2.0]);
    }

    #[test]
    fn the_knee_is_the_lowest_rate_losing_more_than_the_threshold() {
        let sweep = [(1.0, 1.0, 0.0), (2.0, 2.0, 0.05), (3.0, 2.5, 12.0), (4.0, 2.5, 30.0)];
        assert_eq!(knee(&sweep, 0.0), Some(2.0));
        assert_eq!(knee(&sweep, 0.1), Some(3.0));
        assert_eq!(knee(&sweep, 12.0), Some(4.0));
        assert_eq!(knee(&[(1.0, 1.0, 0.0)], 0.0), None);
    }
}
