//! netchar's fuzz targets; the bodies live in `bodies.rs`, shared with the CI test.
#[path = "bodies.rs"]
pub mod bodies;
