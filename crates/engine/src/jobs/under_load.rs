//! Latency under load (`netchar rr --under-load`): request/response latency measured idle,
//! then again while load flows run beside it on the same path. The difference is the
//! queueing the load causes (bufferbloat), the figure crusader and flent's RRUL report.
//!
//! The load is one flow or several ([`LoadPlan`]), each a throughput test of one stream with
//! its own direction and DSCP class; the latency is measured by one probe (an rr test) per
//! class of the flows. Two phases:
//! - idle: every probe at once, for `-t`;
//! - loaded: every flow, and, once the load has run for a second, every probe again, for `-t`;
//!   the flows run a second longer than the probes on each side.
//!
//! The first test of a phase is admitted as usual; the others join it as its companions (the
//! server admits companions beside the test they accompany even when it admits one test at a
//! time, crate::admission). Each test's start is the moment the server admitted it, so its
//! intervals can be placed on the phase's time axis, which starts at the first admission.

use crate::client::{self, ClientConfig, ClientError, ClientRun};
use crate::StopFlag;
use netchar_model::under_load::class_name;
use netchar_model::{
    Direction, EndCondition, Flow, FlowRate, IntervalRecord, LatencyProbe, LoadFlow, ProbeInterval, Role, TestResult,
    TestSpec, UdpRate, UnderLoad,
};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The throughput test of one load flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// TCP, client to server.
    TcpUp,
    /// TCP, server to client.
    TcpDown,
    /// TCP, both ways.
    TcpBidir,
    /// UDP client to server at this many bit/s (0: as fast as it can).
    UdpUp(u64),
}

/// One load flow as asked for: its test and the DSCP of its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadFlowSpec {
    /// Its test.
    pub load: Load,
    /// Its DSCP code point, both ways; None: unmarked.
    pub dscp: Option<u8>,
}

/// Every load flow of a latency-under-load test (`--under-load`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadPlan {
    /// As given, for the result.
    pub text: String,
    /// The flows, in order.
    pub flows: Vec<LoadFlowSpec>,
}

/// The most load flows in one plan: each beyond the first is a companion on the server
/// (crate::admission::MAX_COMPANIONS_PER_TEST also holds the probes).
pub const MAX_LOAD_FLOWS: usize = 8;
/// The most distinct classes, hence probes, in one plan.
pub const MAX_PROBES: usize = 4;

/// DSCP code points of RRUL's classes: best effort, background (CS1), CS5 and expedited
/// forwarding, as flent's `rrul` test marks them.
const RRUL_CLASSES: [u8; 4] = [0, 8, 40, 46];

/// What is wrong with `--under-load`'s value, or one of its flows.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadPlanError {
    /// A flow that is none of the kinds.
    #[error("expected tcp-up, tcp-down, tcp-bidir or udp-up:RATE, each with an optional :dscp=CLASS, or rrul")]
    UnknownFlow,
    /// A class where a single flow without one is asked for ([`Load::parse`]).
    #[error("expected tcp-up, tcp-down, tcp-bidir or udp-up:RATE, without a class")]
    ClassNotTaken,
    /// `udp-up` without its rate.
    #[error("udp-up needs a rate: udp-up:100M")]
    NoRate,
    /// A rate that does not parse.
    #[error("{0}")]
    Rate(#[from] netchar_model::units::UnitError),
    /// A `dscp=` class that is no class.
    #[error("dscp={class}: {why}, or be or bk")]
    Class {
        /// As given.
        class: String,
        /// Why `--dscp` would not take it.
        why: String,
    },
    /// A `KEY=` other than `dscp=`.
    #[error("{0}=: unknown; a flow takes dscp=CLASS")]
    UnknownKey(String),
    /// A part after the flow's kind that is neither a class nor udp-up's rate.
    #[error("{0}: unexpected; a flow takes dscp=CLASS (and udp-up a rate)")]
    Unexpected(String),
    /// One flow of a list is wrong: which, and why.
    #[error("{flow}: {why}")]
    InFlow {
        /// The flow, as given.
        flow: String,
        /// What is wrong with it.
        why: Box<LoadPlanError>,
    },
    /// More flows than a test holds.
    #[error("{0} flows; at most {MAX_LOAD_FLOWS}")]
    TooManyFlows(usize),
    /// More classes than there are latency probes.
    #[error("{0} classes; at most {MAX_PROBES} (one latency probe each)")]
    TooManyClasses(usize),
}

/// Parses a class as `dscp=` takes it: RRUL's `be` and `bk`, or what `--dscp` takes.
fn parse_class(s: &str) -> Result<u8, LoadPlanError> {
    match s.to_ascii_lowercase().as_str() {
        "be" => Ok(0),
        "bk" => Ok(8),
        other => {
            netchar_model::spec::parse_dscp(other).map_err(|why| LoadPlanError::Class { class: s.to_string(), why })
        }
    }
}

impl Load {
    /// Parses `tcp-up`, `tcp-down`, `tcp-bidir`, `udp-up:RATE`.
    pub fn parse(s: &str) -> Result<Self, LoadPlanError> {
        LoadFlowSpec::parse(s).and_then(|f| match f.dscp {
            None => Ok(f.load),
            Some(_) => Err(LoadPlanError::ClassNotTaken),
        })
    }

    fn spec(self, seconds: f64, interval: f64) -> TestSpec {
        let mut spec = match self {
            Self::UdpUp(rate) => {
                let mut s = TestSpec::udp_default();
                s.udp.as_mut().expect("UDP spec").rate =
                    if rate == 0 { UdpRate::Unlimited } else { UdpRate::BitsPerSecond(rate) };
                s
            }
            _ => TestSpec::tcp_default(),
        };
        spec.direction = self.direction();
        spec.end = EndCondition::Seconds(seconds);
        spec.interval_seconds = interval;
        spec
    }

    fn direction(self) -> Direction {
        match self {
            Self::TcpDown => Direction::Down,
            Self::TcpBidir => Direction::Bidir,
            _ => Direction::Up,
        }
    }
}

impl LoadFlowSpec {
    /// Parses one flow: `tcp-up`, `tcp-down`, `tcp-bidir` or `udp-up:RATE`, each optionally
    /// followed by `:dscp=CLASS` (`be`, `bk`, or a `--dscp` name or number).
    pub fn parse(s: &str) -> Result<Self, LoadPlanError> {
        let mut parts = s.split(':');
        let kind = parts.next().unwrap_or_default();
        let mut rate = None;
        let mut dscp = None;
        for part in parts {
            match part.split_once('=') {
                Some(("dscp", c)) => dscp = Some(parse_class(c)?),
                Some((k, _)) => return Err(LoadPlanError::UnknownKey(k.to_string())),
                None if kind == "udp-up" && rate.is_none() => rate = Some(netchar_model::units::parse_bit_rate(part)?),
                None => return Err(LoadPlanError::Unexpected(part.to_string())),
            }
        }
        let load = match (kind, rate) {
            ("tcp-up", None) => Load::TcpUp,
            ("tcp-down", None) => Load::TcpDown,
            ("tcp-bidir", None) => Load::TcpBidir,
            ("udp-up", Some(r)) => Load::UdpUp(r),
            ("udp-up", None) => return Err(LoadPlanError::NoRate),
            _ => return Err(LoadPlanError::UnknownFlow),
        };
        Ok(Self { load, dscp })
    }
}

impl LoadPlan {
    /// Parses `--under-load`: `rrul` (TCP up and down in each of BE, BK, CS5 and EF), or a
    /// comma-separated list of flows ([`LoadFlowSpec::parse`]).
    pub fn parse(s: &str) -> Result<Self, LoadPlanError> {
        let flows: Vec<LoadFlowSpec> = if s.eq_ignore_ascii_case("rrul") {
            RRUL_CLASSES
                .iter()
                .flat_map(|&c| [Load::TcpUp, Load::TcpDown].map(|load| LoadFlowSpec { load, dscp: Some(c) }))
                .collect()
        } else {
            let several = s.contains(',');
            s.split(',')
                .map(|f| {
                    LoadFlowSpec::parse(f.trim()).map_err(|why| match several {
                        true => LoadPlanError::InFlow { flow: f.to_string(), why: Box::new(why) },
                        false => why,
                    })
                })
                .collect::<Result<_, _>>()?
        };
        if flows.len() > MAX_LOAD_FLOWS {
            return Err(LoadPlanError::TooManyFlows(flows.len()));
        }
        let plan = Self { text: s.to_string(), flows };
        if plan.classes().len() > MAX_PROBES {
            return Err(LoadPlanError::TooManyClasses(plan.classes().len()));
        }
        Ok(plan)
    }

    /// The flows' distinct classes in the order they first appear: one probe each.
    pub fn classes(&self) -> Vec<Option<u8>> {
        let mut out = Vec::new();
        for f in &self.flows {
            if !out.contains(&f.dscp) {
                out.push(f.dscp);
            }
        }
        out
    }
}

/// How long the load runs before and after the loaded latency phase.
const LOAD_MARGIN: Duration = Duration::from_secs(1);
/// The interval of the load flows and probes when `-i 0` asks for no live intervals: the
/// time series are still recorded, at this step.
const SERIES_INTERVAL_SECONDS: f64 = 0.5;

/// One test of a phase: its configuration, when it starts after the phase's first admission,
/// and whether it reports its intervals live.
struct Member {
    cfg: ClientConfig,
    delay: Duration,
    live: bool,
}

/// A member's run and its start on the phase's time axis (None: never admitted).
struct Ran {
    run: ClientRun,
    start: Option<f64>,
}

/// Runs the idle phase, then the loaded phase, and merges them into one result: the first
/// probe's loaded rr result with `summary.rr_idle`, `summary.rr_loaded`, `summary.under_load`
/// and, with one flow, `summary.load`.
pub fn run(
    rr: &ClientConfig,
    plan: &LoadPlan,
    stop: &StopFlag,
    on_interval: &mut dyn FnMut(&IntervalRecord),
) -> ClientRun {
    let EndCondition::Seconds(seconds) = rr.spec.end else {
        let e = ClientError::Session(crate::error::SessionError::option(
            "--under-load",
            "--under-load needs a duration (-t), not a transaction count",
        ));
        return ClientRun::failed(e);
    };
    let live_intervals = rr.spec.interval_seconds > 0.0;
    let interval = if live_intervals { rr.spec.interval_seconds } else { SERIES_INTERVAL_SECONDS };
    let classes = plan.classes();
    let probe = |dscp: Option<u8>, first: bool| {
        let mut cfg = rr.clone();
        cfg.spec.interval_seconds = interval;
        if let Some(d) = dscp {
            cfg.spec.ip.tos = Some(d << 2);
        }
        Member { cfg, delay: Duration::ZERO, live: first && live_intervals }
    };
    let idle = run_together(classes.iter().enumerate().map(|(i, &c)| probe(c, i == 0)).collect(), stop, on_interval);
    if idle[0].run.error.is_some() || stop.is_raised() {
        return idle.into_iter().next().expect("one probe at least").run;
    }
    let mut loaded_members: Vec<Member> = plan
        .flows
        .iter()
        .map(|f| {
            let mut cfg = rr.clone();
            cfg.spec = f.load.spec(seconds + 2.0 * LOAD_MARGIN.as_secs_f64(), interval);
            cfg.spec.ip.tos = f.dscp.map(|d| d << 2);
            cfg.spec.server_cpu = None;
            Member { cfg, delay: Duration::ZERO, live: false }
        })
        .collect();
    loaded_members.extend(classes.iter().enumerate().map(|(i, &c)| Member { delay: LOAD_MARGIN, ..probe(c, i == 0) }));
    let mut loaded = run_together(loaded_members, stop, on_interval);
    let probes_loaded = loaded.split_off(plan.flows.len());
    merge(rr, plan, idle, loaded, probes_loaded)
}

/// Runs `members` at once, the first as an ordinary test and the others as its companions,
/// each after its delay from the first's admission; at most one is `live` and reports its
/// intervals to `on_interval` (it runs on this thread, the others on their own).
fn run_together(members: Vec<Member>, stop: &StopFlag, on_interval: &mut dyn FnMut(&IntervalRecord)) -> Vec<Ran> {
    let n = members.len();
    // Long enough for the first test's connection and setup: its own limits.
    let admission_timeout = members.first().map_or(Duration::ZERO, |m| m.cfg.connect_timeout + m.cfg.timeouts.phase);
    let (first_tx, first_rx) = mpsc::channel::<[u8; 16]>();
    let mut to_companions = Vec::new();
    let mut admitted_rx = Vec::new();
    let mut handles = Vec::new();
    let mut live = None;
    for (i, mut m) in members.into_iter().enumerate() {
        let (adm_tx, adm_rx) = mpsc::channel();
        admitted_rx.push(adm_rx);
        let (cookie_tx, cookie_rx) = mpsc::channel::<([u8; 16], Instant)>();
        if i > 0 {
            to_companions.push(cookie_tx);
        }
        let first_tx = (i == 0).then(|| first_tx.clone());
        let job = move |m: &mut Member, stop: &StopFlag, on_iv: &mut dyn FnMut(&IntervalRecord)| {
            if i > 0 {
                let Ok((cookie, origin)) = cookie_rx.recv() else {
                    let e = ClientError::Stream("the load test did not start".into());
                    return ClientRun::failed(e);
                };
                std::thread::sleep((origin + m.delay).saturating_duration_since(Instant::now()));
                m.cfg.companion = Some(cookie);
            }
            m.cfg.cookie_tx = Some(watch_admission(adm_tx, first_tx));
            client::run(&m.cfg, stop, on_iv)
        };
        if m.live {
            live = Some((i, m, job));
        } else {
            let stop = stop.clone();
            handles.push((i, std::thread::spawn(move || job(&mut m, &stop, &mut |_| {}))));
        }
    }
    drop(first_tx);
    let hand_out = std::thread::spawn(move || hand_out_cookie(&first_rx, &to_companions, admission_timeout));
    let mut runs: Vec<Option<ClientRun>> = (0..n).map(|_| None).collect();
    if let Some((i, mut m, job)) = live {
        runs[i] = Some(job(&mut m, stop, on_interval));
    }
    for (i, h) in handles {
        runs[i] = Some(
            h.join().unwrap_or_else(|_| ClientRun::failed(ClientError::Stream("a load or probe thread failed".into()))),
        );
    }
    let origin = hand_out.join().ok().flatten();
    runs.into_iter()
        .zip(admitted_rx)
        .map(|(run, adm)| Ran {
            run: run.expect("every member ran: on this thread or joined above"),
            start: match (origin, adm.try_recv()) {
                (Some(o), Ok(at)) => Some(at.saturating_duration_since(o).as_secs_f64()),
                _ => None,
            },
        })
        .collect()
}

/// Waits for the first test's cookie and hands it, with the instant it came (the phase's time
/// zero), to every companion. None when the first test was not admitted in `timeout` or ended
/// first; the companions' channels then close, and they report that the load did not start.
fn hand_out_cookie(
    first: &mpsc::Receiver<[u8; 16]>,
    companions: &[mpsc::Sender<([u8; 16], Instant)>],
    timeout: Duration,
) -> Option<Instant> {
    let cookie = first.recv_timeout(timeout).ok()?;
    let origin = Instant::now();
    for tx in companions {
        let _ = tx.send((cookie, origin));
    }
    Some(origin)
}

/// A cookie channel for one test that notes the instant of its admission on `admitted` and,
/// for the phase's first test, passes the cookie on to `first`.
fn watch_admission(admitted: mpsc::Sender<Instant>, first: Option<mpsc::Sender<[u8; 16]>>) -> mpsc::Sender<[u8; 16]> {
    let (tx, rx) = mpsc::channel::<[u8; 16]>();
    std::thread::spawn(move || {
        if let Ok(cookie) = rx.recv() {
            let _ = admitted.send(Instant::now());
            if let Some(f) = first {
                let _ = f.send(cookie);
            }
        }
    });
    tx
}

fn merge(rr: &ClientConfig, plan: &LoadPlan, idle: Vec<Ran>, flows: Vec<Ran>, probes: Vec<Ran>) -> ClientRun {
    let classes = plan.classes();
    let first_error = |runs: &[Ran]| runs.iter().find_map(|r| r.run.error.as_ref().map(ToString::to_string));
    let error = first_error(&probes).or_else(|| first_error(&flows));
    let flow_records: Vec<LoadFlow> = plan.flows.iter().zip(&flows).map(|(spec, ran)| load_flow(spec, ran)).collect();
    let rr_dscp = rr.spec.ip.tos.map(|t| t >> 2);
    let probe_records: Vec<LatencyProbe> =
        classes.iter().zip(idle.iter().zip(&probes)).map(|(&c, (i, l))| latency_probe(c.or(rr_dscp), i, l)).collect();
    let mut probes = probes.into_iter();
    let Some(Ran { run: first, .. }) = probes.next() else {
        return ClientRun::failed(ClientError::Stream("no latency probe ran".into()));
    };
    let Some(mut result): Option<TestResult> = first.result else {
        let idle_run = idle.into_iter().next().map(|r| r.run);
        let clock_zero = idle_run.as_ref().and_then(|r| r.clock_zero);
        let idle_result = idle_run.and_then(|r| r.result);
        return ClientRun {
            result: idle_result,
            error: first.error.or_else(|| error.map(ClientError::Stream)),
            clock_zero,
        };
    };
    result.summary.rr_idle = probe_records.first().and_then(|p| p.idle.clone());
    result.summary.rr_loaded = result.summary.rr.clone();
    if let [only] = &flows[..] {
        result.summary.load = only.run.result.as_ref().map(|r| Box::new(r.summary.clone()));
    }
    result.summary.under_load =
        Some(Box::new(UnderLoad { load: plan.text.clone(), flows: flow_records, probes: probe_records }));
    if let (Some(e), None) = (&error, &result.error) {
        result.error = Some(e.clone());
    }
    ClientRun {
        result: Some(result),
        error: first.error.or_else(|| error.map(ClientError::Stream)),
        clock_zero: first.clock_zero,
    }
}

fn load_flow(spec: &LoadFlowSpec, ran: &Ran) -> LoadFlow {
    let start = ran.start.unwrap_or(0.0);
    let r = ran.run.result.as_ref();
    let intervals = r.map(|r| flow_rates(r, start)).unwrap_or_default();
    LoadFlow {
        protocol: if matches!(spec.load, Load::UdpUp(_)) { "udp" } else { "tcp" }.into(),
        direction: spec.load.direction(),
        dscp: spec.dscp,
        class: class_name(spec.dscp),
        start,
        up: r.and_then(|r| r.summary.up.clone()),
        down: r.and_then(|r| r.summary.down.clone()),
        intervals,
        error: ran.run.error.as_ref().map(ToString::to_string),
    }
}

/// Each interval's rate per flow as the receiver measured it (the sender's where the
/// receiver reported no intervals), shifted by `start`.
fn flow_rates(r: &TestResult, start: f64) -> Vec<FlowRate> {
    let mut out = Vec::new();
    for iv in &r.intervals {
        for flow in [Flow::Up, Flow::Down] {
            let sum = iv.sum.iter().filter(|s| s.flow == flow);
            let Some(s) = sum.clone().find(|s| s.role == Role::Receiver).or_else(|| sum.clone().next()) else {
                continue;
            };
            out.push(FlowRate {
                start: start + iv.start,
                end: start + iv.end,
                flow,
                bytes: s.bytes,
                bits_per_second: s.bits_per_second,
            });
        }
    }
    out
}

fn latency_probe(dscp: Option<u8>, idle: &Ran, loaded: &Ran) -> LatencyProbe {
    let start = loaded.start.unwrap_or(0.0);
    let intervals = loaded
        .run
        .result
        .as_ref()
        .map(|r| {
            r.intervals
                .iter()
                .filter_map(|iv| {
                    // The first requesting connection's round trips (one with -P 1).
                    let rr = iv.streams.iter().find_map(|s| s.sample.rr.as_ref())?;
                    Some(ProbeInterval {
                        start: start + iv.start,
                        end: start + iv.end,
                        transactions: rr.transactions,
                        p50_us: rr.latency_us.p50,
                        p99_us: rr.latency_us.p99,
                        max_us: rr.latency_us.max,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let figures = |ran: &Ran| ran.run.result.as_ref().and_then(|r| r.summary.rr.clone());
    LatencyProbe {
        dscp,
        class: class_name(dscp),
        idle: figures(idle),
        loaded: figures(loaded),
        start,
        intervals,
        error: loaded.run.error.as_ref().or(idle.run.error.as_ref()).map(ToString::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrul_is_one_flow_up_and_one_down_in_each_of_four_classes() {
        let p = LoadPlan::parse("rrul").unwrap();
        assert_eq!(p.flows.len(), 8);
        assert_eq!(p.classes(), [Some(0), Some(8), Some(40), Some(46)].to_vec());
        for c in RRUL_CLASSES {
            let of_class: Vec<Load> = p.flows.iter().filter(|f| f.dscp == Some(c)).map(|f| f.load).collect();
            assert_eq!(of_class, [Load::TcpUp, Load::TcpDown]);
        }
    }

    #[test]
    fn lists_take_classes_and_rates_and_the_single_forms_still_parse() {
        let p = LoadPlan::parse("tcp-up:dscp=EF,tcp-down:dscp=CS1,udp-up:100M").unwrap();
        let want = [
            LoadFlowSpec { load: Load::TcpUp, dscp: Some(46) },
            LoadFlowSpec { load: Load::TcpDown, dscp: Some(8) },
            LoadFlowSpec { load: Load::UdpUp(100_000_000), dscp: None },
        ];
        assert_eq!(p.flows, want);
        assert_eq!(p.classes(), [Some(46), Some(8), None].to_vec());
        assert_eq!(LoadFlowSpec::parse("udp-up:1M:dscp=bk").unwrap().dscp, Some(8));
        for single in ["tcp-up", "tcp-down", "tcp-bidir", "udp-up:10M"] {
            assert_eq!(LoadPlan::parse(single).unwrap().flows.len(), 1, "{single}");
            assert!(Load::parse(single).is_ok(), "{single}");
        }
    }

    #[test]
    fn bad_flows_say_what_is_wrong() {
        let e = |s: &str| LoadPlan::parse(s).unwrap_err();
        assert_eq!(e("tcp-sideways"), LoadPlanError::UnknownFlow);
        assert!(e("tcp-sideways").to_string().starts_with("expected tcp-up, "), "{}", e("tcp-sideways"));
        assert_eq!(e("udp-up"), LoadPlanError::NoRate);
        assert_eq!(e("udp-up").to_string(), "udp-up needs a rate: udp-up:100M");
        assert!(matches!(e("udp-up:fast"), LoadPlanError::Rate(_)), "{:?}", e("udp-up:fast"));
        assert!(matches!(e("tcp-up:dscp=zz"), LoadPlanError::Class { class, .. } if class == "zz"));
        assert!(e("tcp-up:dscp=zz").to_string().starts_with("dscp=zz: "), "{}", e("tcp-up:dscp=zz"));
        assert_eq!(e("tcp-up:prio=1"), LoadPlanError::UnknownKey("prio".into()));
        assert_eq!(e("tcp-up:prio=1").to_string(), "prio=: unknown; a flow takes dscp=CLASS");
        assert_eq!(e("tcp-up:9"), LoadPlanError::Unexpected("9".into()));
        // In a list, the flow at fault is named before what is wrong with it.
        let listed = e("tcp-up,tcp-down:prio=1");
        assert!(
            matches!(&listed, LoadPlanError::InFlow { flow, why } if flow == "tcp-down:prio=1" && **why == LoadPlanError::UnknownKey("prio".into())),
            "{listed:?}"
        );
        assert_eq!(listed.to_string(), "tcp-down:prio=1: prio=: unknown; a flow takes dscp=CLASS");
        assert_eq!(e(&["tcp-up"; 9].join(",")), LoadPlanError::TooManyFlows(9));
        assert_eq!(e(&["tcp-up"; 9].join(",")).to_string(), "9 flows; at most 8");
        let five = "tcp-up:dscp=be,tcp-up:dscp=bk,tcp-up:dscp=ef,tcp-up:dscp=cs5,tcp-up:dscp=af41";
        assert_eq!(e(five), LoadPlanError::TooManyClasses(5));
        assert!(e(five).to_string().contains("at most 4"));
        assert_eq!(Load::parse("tcp-up:dscp=ef"), Err(LoadPlanError::ClassNotTaken));
    }
}
