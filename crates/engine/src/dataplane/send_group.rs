//! Several TCP senders in one thread, for more sending streams than CPUs.
//!
//! A thread per stream is right while each has a CPU. With more streams than CPUs the threads
//! take turns by the scheduler's slice (milliseconds), so the receiver sees one stream at a
//! time, megabytes long. One thread writing one block to each stream in turn (blocking
//! writes, as iperf3's client does: it makes one `pselect` per ~30 blocks) interleaves them
//! block by block instead.

use super::{send_deadline, Controls, StreamShared, POLL};
use netchar_model::TestSpec;
use netchar_wire::payload::StreamPayload;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// One stream of a group: its counters and its socket.
pub(super) struct Member {
    pub(super) shared: Arc<StreamShared>,
    pub(super) socket: TcpStream,
}

struct State {
    sent: u64,
    budget: Option<u64>,
    open: bool,
    /// Its end recorded and its write side shut down.
    finished: bool,
    /// The end of its last write.
    end: Instant,
    outcome: io::Result<()>,
}

/// Sends on every member until the deadline, each member's byte budget or a stop; returns
/// each member's outcome, in order. Every member's write side is shut down at its end, so its
/// receiver reads every byte and then EOF, as with a thread per stream. Each writes its
/// stream's bytes of `payload` (dataplane/integrity.rs).
pub(super) fn send(
    members: &[Member],
    controls: &Controls,
    spec: &TestSpec,
    payload: &StreamPayload,
    started: Instant,
) -> Vec<io::Result<()>> {
    let block = spec.block_bytes as usize;
    let deadline = send_deadline(spec, started);
    let mut states: Vec<State> = members
        .iter()
        .map(|m| {
            // A blocked write returns within POLL, so a stop or the deadline is seen.
            let outcome = m.socket.set_write_timeout(Some(POLL));
            State {
                sent: 0,
                budget: spec.byte_budget(m.shared.id),
                open: outcome.is_ok(),
                finished: false,
                end: started,
                outcome,
            }
        })
        .collect();
    // One clock reading per block, as a stream's own thread: the reading after a write is the
    // next write's "now".
    let mut now = Instant::now();
    let mut open = states.iter().filter(|s| s.open).count();
    while open > 0 {
        for (m, st) in members.iter().zip(states.iter_mut()) {
            if !st.open {
                continue;
            }
            if controls.stop_senders.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d) {
                open = 0;
                break;
            }
            let len = match st.budget {
                Some(b) if st.sent >= b => {
                    finish(m, st, started);
                    open -= 1;
                    continue;
                }
                Some(b) => block.min((b - st.sent) as usize),
                None => block,
            };
            match (&m.socket).write(payload.slice(m.shared.id, st.sent, len)) {
                Ok(0) => {
                    st.outcome = Err(io::Error::new(io::ErrorKind::WriteZero, "the socket accepted no data"));
                    finish(m, st, started);
                    open -= 1;
                }
                Ok(n) => {
                    st.sent += n as u64;
                    m.shared.bytes.store(st.sent, Ordering::Release);
                    now = Instant::now();
                    st.end = now;
                }
                Err(e) if crate::is_retry(&e) => now = Instant::now(),
                Err(e) => {
                    st.outcome = Err(e);
                    finish(m, st, started);
                    open -= 1;
                }
            }
        }
    }
    members
        .iter()
        .zip(states)
        .map(|(m, mut st)| {
            finish(m, &mut st, started);
            st.outcome
        })
        .collect()
}

/// Ends one member's sending: records when its last write ended and shuts its write side down
/// (at once, so a member whose budget ran out is not held open by the others).
fn finish(m: &Member, st: &mut State, started: Instant) {
    st.open = false;
    if !st.finished {
        st.finished = true;
        m.shared.end_ns.store(st.end.saturating_duration_since(started).as_nanos() as u64, Ordering::Release);
        let _ = m.socket.shutdown(Shutdown::Write);
    }
}
