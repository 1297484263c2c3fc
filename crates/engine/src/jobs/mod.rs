//! Jobs: the things that run many tests (suites, sequences), each yielding its results to a sink.
pub mod ecos;
pub mod netio;
