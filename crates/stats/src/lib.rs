//! Measurement maths with no I/O and no clock: time comes in as numbers.
//!
//! - [`sequence`]: what happened to each datagram of a stream, from its 64-bit sequence number:
//!   new, late (arrived after a higher number: reordered, not lost), duplicate, or lost (never
//!   arrived), with the RFC 4737 reordering extent;
//! - [`jitter`]: RFC 3550 interarrival jitter and percentiles of the transit-time variation.
//!
//! ```
//! use netchar_stats::sequence::{Arrival, SequenceTracker};
//! let mut t = SequenceTracker::new();
//! assert_eq!(t.record(0), Arrival::InOrder);
//! assert_eq!(t.record(2), Arrival::InOrder);   // 1 is missing for now
//! assert_eq!(t.record(1), Arrival::Late { extent: 1 });
//! assert_eq!(t.record(1), Arrival::Duplicate);
//! assert_eq!(t.lost(3), 0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod changepoint;
pub mod compare;
pub mod distribution;
pub mod jitter;
pub mod sequence;
