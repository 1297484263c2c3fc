//! Every kind of plot over the result files in tests/fixtures-plots (written by the real
//! binary on loopback: `suite bwsweep`, `suite netio`, `rr --under-load`, `tcp --repeat 4
//! --save` twice, `tcp -P 3 -i 0.25`): each SVG parses as XML and has the expected series,
//! axis labels and units; the figures drawn are the results' own (the knee, the means and
//! their intervals); each PNG decodes to the chart's size with text drawn in it.

use netchar_report::chart::{to_png, to_svg, Chart, CHART_SIZE};
use netchar_report::plots::{charts, compare_charts, knee, CONFIDENCE};
use netchar_report::{parse_saved, Saved};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures-plots")
}

/// The results in `name` (a file or a `--save` directory), labelled as `netchar report`
/// labels them: relative paths.
fn load(name: &str) -> Vec<Saved> {
    let path = root().join(name);
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v
    } else {
        vec![path]
    };
    files
        .iter()
        .flat_map(|f| {
            let label = f.strip_prefix(root()).unwrap().display().to_string();
            parse_saved(&std::fs::read_to_string(f).unwrap(), &label).unwrap()
        })
        .collect()
}

/// The SVG's text elements, after checking it is one well-formed `<svg>` document.
fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants().filter(|n| n.has_tag_name("text")).map(|n| n.text().unwrap_or("").trim().to_string()).collect()
}

fn the_chart(all: &[Chart], stem: &str) -> Chart {
    all.iter()
        .find(|c| c.stem == stem)
        .unwrap_or_else(|| panic!("no chart {stem} in {:?}", all.iter().map(|c| &c.stem).collect::<Vec<_>>()))
        .clone()
}

fn assert_texts(c: &Chart, want: &[&str]) -> Vec<String> {
    let t = texts(&to_svg(c).unwrap());
    for w in want {
        assert!(t.iter().any(|x| x == w), "{}: no text {w:?} in {t:?}", c.stem);
    }
    t
}

#[test]
fn sweep_plots_received_rate_and_loss_against_offered_with_the_knees() {
    let saved = load("suite-bwsweep-knee.json");
    let c = the_chart(&charts(&saved), "sweep-suite-bwsweep-knee_json");
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["received = offered", "up received", "up loss %", "down received", "down loss %"]);
    // The knee of each direction, from the fixture: the lowest offered rate that lost.
    let mut want = Vec::new();
    for dir in ["up", "down"] {
        let mut pts: Vec<(f64, f64, f64)> = saved
            .iter()
            .filter(|s| format!("{:?}", s.result.test.spec.direction).to_lowercase() == dir)
            .map(|s| {
                let f = s.result.summary.up.as_ref().or(s.result.summary.down.as_ref()).unwrap();
                let offered = match s.result.test.spec.udp.as_ref().unwrap().rate {
                    netchar_model::UdpRate::BitsPerSecond(b) => b as f64,
                    _ => panic!("a sweep offers rates"),
                };
                (offered, f.receiver.bits_per_second, f.receiver.udp_received.as_ref().unwrap().loss_percent)
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_eq!(pts.len(), 6, "{dir}: 1G to 6G by 1G");
        let k =
            knee(&pts, netchar_report::sweep::DEFAULT_KNEE_LOSS_PERCENT).expect("the fixture loses above some rate");
        want.push(format!("{dir} knee {} Gbit/s", k / 1e9));
        // The series carry the fixture's own figures, in the axis units.
        let rx = c.series.iter().find(|s| s.name == format!("{dir} received")).unwrap();
        let loss = c.series.iter().find(|s| s.name == format!("{dir} loss %")).unwrap();
        assert!(loss.right_axis && !rx.right_axis);
        for (i, p) in pts.iter().enumerate() {
            assert_eq!(rx.points[i], (p.0 / 1e9, p.1 / 1e9));
            assert_eq!(loss.points[i], (p.0 / 1e9, p.2));
        }
    }
    let marks: Vec<&str> = c.markers.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(marks, want);
    let mut labels = vec!["offered rate (Gbit/s)", "received rate (Gbit/s)", "loss (%)"];
    labels.extend(names.iter().copied());
    labels.extend(want.iter().map(|s| s.as_str()));
    assert_texts(&c, &labels);
}

#[test]
fn latency_plots_idle_against_under_load() {
    let saved = load("rr-under-load.json");
    let all = charts(&saved);
    let r = &saved[0].result.summary;
    let (idle, loaded) = (r.rr_idle.as_ref().unwrap(), r.rr_loaded.as_ref().unwrap());
    let pct = the_chart(&all, "001-rr-under-load_json-latency");
    assert_texts(&pct, &["idle", "under load", "round-trip latency (µs)", "percentile", "p50", "p99", "p99.9", "max"]);
    assert_eq!(pct.series[0].points[3], (3.0, idle.latency_us.p99));
    assert_eq!(pct.series[1].points[3], (3.0, loaded.latency_us.p99));
    let cdf = the_chart(&all, "001-rr-under-load_json-latency-cdf");
    assert_texts(&cdf, &["idle", "under load", "round-trip latency (µs)", "transactions at or below (%)"]);
    assert_eq!(cdf.series[1].points[2], (loaded.latency_us.p90, 90.0));
    assert!(cdf.x.log, "latency spans decades: a log axis");
}

#[test]
fn block_size_plot_has_each_protocol_and_direction() {
    let saved = load("suite-netio.json");
    let c = the_chart(&charts(&saved), "blocks-suite-netio_json");
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["TCP down", "TCP up", "UDP down", "UDP up"]);
    for s in &c.series {
        let sizes: Vec<f64> = s.points.iter().map(|p| p.0).collect();
        assert_eq!(sizes, [1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32767.0], "{}: netio's table", s.name);
    }
    let t = assert_texts(&c, &["block size (bytes)", "TCP up", "UDP down", "1024", "4096"]);
    assert!(t.iter().any(|x| x.starts_with("received rate (") && x.ends_with("bit/s)")), "{t:?}");
}

#[test]
fn compare_plot_boxes_each_set_with_its_interval() {
    let mut saved = load("base-16k");
    saved.extend(load("new-128k"));
    let all = compare_charts(&saved);
    assert_eq!(all.len(), 1, "TCP only");
    let c = &all[0];
    assert_eq!(c.stem, "compare-tcp");
    let names: Vec<&str> = c.boxes.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["base-16k", "new-128k"]);
    for b in &c.boxes {
        let runs: Vec<f64> = saved
            .iter()
            .filter(|s| s.label.starts_with(&b.name))
            .map(|s| s.result.summary.up.as_ref().unwrap().receiver.bits_per_second / 1e9)
            .collect();
        assert_eq!(runs.len(), 4);
        assert_eq!(b.values, runs);
        let mean = runs.iter().sum::<f64>() / 4.0;
        assert!((b.mean - mean).abs() < 1e-9);
        // Student's t for 3 degrees of freedom at 95%: 3.182.
        let sd = (runs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert!((b.ci_half - 3.182 * sd / 2.0).abs() < 1e-9 * mean.max(1.0), "{} vs {}", b.ci_half, sd);
        assert!(b.five[0] <= b.five[1] && b.five[1] <= b.five[2] && b.five[2] <= b.five[3] && b.five[3] <= b.five[4]);
    }
    assert!(c.title.contains(&format!("{CONFIDENCE:.0}% interval")));
    assert_texts(c, &["base-16k", "new-128k", "set", "received rate (Gbit/s)"]);
}

#[test]
fn throughput_plot_has_every_stream_and_the_sum() {
    let saved = load("tcp-p3-intervals.json");
    let c = the_chart(&charts(&saved), "001-tcp-p3-intervals_json");
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["up stream 1", "up stream 2", "up stream 3", "up sum"]);
    let t = assert_texts(&c, &["time (s)", "up stream 1", "up stream 3", "up sum"]);
    assert!(t.iter().any(|x| x.starts_with("throughput (") && x.ends_with("bit/s)")), "{t:?}");
}

#[test]
fn every_chart_of_every_fixture_is_a_valid_svg_and_png() {
    let mut saved = Vec::new();
    for name in [
        "base-16k",
        "new-128k",
        "rr-under-load.json",
        "suite-bwsweep-knee.json",
        "suite-netio.json",
        "tcp-p3-intervals.json",
    ] {
        saved.extend(load(name));
    }
    let all = charts(&saved);
    let stems: Vec<&str> = all.iter().map(|c| c.stem.as_str()).collect();
    for kind in ["sweep-", "blocks-", "compare-tcp", "-latency", "-latency-cdf", "-tcp-p3-intervals_json"] {
        assert!(stems.iter().any(|s| s.contains(kind)), "no {kind} chart in {stems:?}");
    }
    // PNGs of one of each kind (drawing all of them takes long in a debug build).
    let mut seen = Vec::new();
    for c in &all {
        let svg = to_svg(c).unwrap();
        texts(&svg);
        let kind =
            c.stem.trim_start_matches(|ch: char| ch.is_ascii_digit()).split('-').next().unwrap_or("").to_string();
        let kind = if c.stem.ends_with("latency") || c.stem.ends_with("cdf") { c.stem.clone() } else { kind };
        if seen.contains(&kind) && !c.stem.ends_with("latency-cdf") {
            continue;
        }
        seen.push(kind);
        let png = to_png(c).unwrap();
        let decoder = png::Decoder::new(png.as_slice());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), CHART_SIZE, "{}", c.stem);
        assert_eq!(info.color_type, png::ColorType::Rgb);
        // Text and axes are drawn: dark pixels, and not only a few.
        let dark = buf[..info.buffer_size()].chunks(3).filter(|p| p.iter().all(|&v| v < 80)).count();
        assert!(dark > 2000, "{}: {dark} dark pixels", c.stem);
    }
}

#[test]
fn two_sweeps_are_also_drawn_in_one_chart_named_by_set() {
    let mut saved = load("suite-bwsweep-knee.json");
    saved.extend(load("../fixtures/suite-bwsweep.json"));
    let all = charts(&saved);
    let c = the_chart(&all, "sweeps-compared");
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "received = offered",
            "suite-bwsweep-knee_json up received",
            "suite-bwsweep-knee_json up loss %",
            "suite-bwsweep-knee_json down received",
            "suite-bwsweep-knee_json down loss %",
            "suite-bwsweep_json up received",
            "suite-bwsweep_json up loss %",
            "suite-bwsweep_json down received",
            "suite-bwsweep_json down loss %",
        ]
    );
    // The lossless sweep has no knee; the other keeps both of its own.
    let marks: Vec<&str> = c.markers.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert!(marks.iter().all(|m| m.starts_with("suite-bwsweep-knee_json ")));
    // Each sweep keeps its own chart too.
    the_chart(&all, "sweep-suite-bwsweep-knee_json");
    the_chart(&all, "sweep-suite-bwsweep_json");
    assert_texts(&c, &["suite-bwsweep_json down received", "offered rate (Gbit/s)", "loss (%)"]);
}

/// A sweep saved with `--knee-loss` keeps its threshold in its steps' records, and the plot
/// marks the knee there: per direction the lowest offered rate whose loss (the plotted loss
/// series' own points) is above it.
#[test]
fn the_sweep_plot_marks_the_knee_at_the_threshold_the_sweep_was_run_with() {
    for pct in [0.0, 5.0, 20.0] {
        let mut saved = load("suite-bwsweep-knee.json");
        for s in &mut saved {
            s.result.step = Some(netchar_model::StepRecord { knee_loss_percent: Some(pct), ..Default::default() });
        }
        let c = the_chart(&charts(&saved), "sweep-suite-bwsweep-knee_json");
        let mut want = Vec::new();
        for dir in ["up", "down"] {
            let loss = c.series.iter().find(|s| s.name == format!("{dir} loss %")).unwrap();
            // The points in Gbit/s, as the knee marker names them.
            let pts: Vec<(f64, f64, f64)> = loss.points.iter().map(|&(x, l)| (x, 0.0, l)).collect();
            if let Some(k) = knee(&pts, pct) {
                want.push(format!("{dir} knee {k} Gbit/s"));
            }
        }
        assert!(!want.is_empty(), "the fixture loses more than {pct}% somewhere");
        let marks: Vec<&str> = c.markers.iter().map(|m| m.label.as_str()).collect();
        assert_eq!(marks, want, "--knee-loss {pct}");
    }
}
