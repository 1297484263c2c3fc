//! The skip-or-fail switch, from the crate the workspace's tests share (netchar_testkit).
#![allow(unused_imports)]
pub(crate) use netchar_testkit::require::*;
