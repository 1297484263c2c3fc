//! The send-only UDP test (`--proto sink`, alias `send-only`): datagrams into any address,
//! with no netchar server and no control connection, for a discard interface, a veth whose
//! peer drops, or any sink. It measures the sending host's stack alone: what the kernel
//! accepted, per thread, its refusals by errno, and the CPU it cost; what left is the egress
//! interface's count in the result's evidence, and a counter the user names (`--nft-counter`).
//!
//! Its session is the UDP discard client's (crate::peers::services): no hello, nothing back.
//! What differs is what the figures mean, so the registry holds it as a protocol of its own.

use crate::control::ClientControl;
use crate::registry::{SessionArgs, SessionError};
use netchar_model::{Caveat, Direction, FarEnd, Flow, TestSpec};

/// The registry's client constructor: the discard client's UDP session.
pub(crate) fn session(a: &SessionArgs<'_>) -> Result<Box<dyn ClientControl>, SessionError> {
    crate::peers::services::discard_session(a)
}

/// Up only, and nothing a server would have to do.
pub(crate) fn shape(spec: &TestSpec) -> Result<TestSpec, SessionError> {
    if spec.direction != Direction::Up {
        let flag = if spec.direction == Direction::Down { "-R" } else { "--bidir" };
        return Err(SessionError::option(flag, format!("--proto sink: {flag}: a sink only takes; this end sends")));
    }
    if spec.server_load.is_some() || spec.measure_idle || spec.server_cpu.is_some() {
        return Err(SessionError::Unsupported(
            "--proto sink: there is no server: --server-load, --idle and a server CPU in -A need a netchar server"
                .into(),
        ));
    }
    crate::peers::services::discard_shape(spec)
}

/// Nothing receives: the figures are the sender's, and the evidence says what left.
pub(crate) fn measurement(_: &TestSpec) -> (FarEnd, Vec<Caveat>) {
    let note = "send-only into a sink: nothing receives and nothing reports; these are the datagrams the kernel \
                accepted, and the evidence holds what the egress interface (and any --nft-counter rule) counted";
    (FarEnd::Sink, vec![Caveat::always(Some(Flow::Up), note)])
}
