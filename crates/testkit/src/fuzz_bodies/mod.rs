//! The bodies of netchar's fuzz targets: one function per decoder or state machine of
//! `netchar-wire`, plus the test request's `TestSpec`. Each asserts invariants, not only "no
//! panic". Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`, through the fuzz crate's
//! `bodies`) and by the tests CI runs on stable Rust (`crates/wire/tests/arbitrary_bytes.rs`
//! and `netperf_props.rs`), both by dependency on this crate, so both check the same things.
//!
//! - [`decoders`]: byte-input bodies (hello, frames, control messages, datagrams, key files,
//!   iperf3's client session, iperf2's headers and report, netio's server and client machines,
//!   eCos nc_test's records and loops)
//!   and their seeds;
//! - [`netperf`]: netperf's control messages and both roles' sessions, and their seeds (run on
//!   stable Rust by `crates/wire/tests/netperf_props.rs`);
//! - [`test_spec`]: the test request's spec, as JSON and field by field;
//! - [`script`]: what a session's script is made of (the peer's messages, time, the driver's
//!   calls), and a whole test as a script;
//! - [`session`]: the server and client session bodies and the invariants every step keeps.
//!
//! Structured inputs (frame chunks, session scripts) derive `arbitrary::Arbitrary` under this
//! crate's `arbitrary` feature, which the fuzz crate turns on: the wire crate's tests take the
//! `fuzz-bodies` feature alone and build the same types with proptest strategies instead.

pub mod decoders;
pub mod netperf;
pub mod script;
pub mod session;
pub mod test_spec;

pub use decoders::{
    control_messages, datagram, frame, hello, iperf2, iperf3_client, iperf3_server, key_file, nc_test, netio_client,
    netio_server, seeds, FrameInput,
};
pub use session::{client_session, server_session};
pub use test_spec::{spec, spec_fields};
