//! Jobs: the things that run many tests, each yielding its results to a sink (`sink`).
pub mod max_rate;
pub mod plan;
pub mod rate_sweep;
pub mod repeat;
pub mod sink;
pub mod sizes;
#[cfg(test)]
mod testing;
pub mod under_load;
