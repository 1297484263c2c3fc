//! Jobs: the things that run many tests (repeats, searches, sweeps, plans, the netio and eCos
//! suites, latency under load), each yielding its results to a sink (`sink`).
pub mod ecos;
pub mod max_rate;
pub mod netio;
pub mod plan;
pub mod rate_sweep;
pub mod repeat;
pub mod sink;
pub mod sizes;
#[cfg(test)]
mod testing;
pub mod under_load;
