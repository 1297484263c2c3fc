//! Formats netchar results. Reporters only format: they read the one result model
//! ([`netchar_model::TestResult`] and its live [`netchar_model::IntervalRecord`]s) and return
//! text; they never measure and never touch a socket.
//!
//! ```
//! use netchar_model::units::RateFormat;
//! assert_eq!(RateFormat::Mbits.format(191.3e6), "191.30 Mbit/s");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod json;
pub mod text;

/// Something that shows a test as it runs and when it ends.
pub trait Reporter {
    /// Once, before data flows.
    fn on_start(&mut self, info: &netchar_model::TestInfo) -> String;
    /// For each interval this end completes.
    fn on_interval(&mut self, interval: &netchar_model::IntervalRecord) -> String;
    /// Once, with the whole result (also a partial one after an error).
    fn on_finish(&mut self, result: &netchar_model::TestResult) -> String;
}
