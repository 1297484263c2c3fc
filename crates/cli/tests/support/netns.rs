//! The network-namespace test bed, from the crate the workspace's tests share
//! (netchar_testkit).
#![allow(unused_imports)]
pub(crate) use netchar_testkit::netns::*;
pub(crate) use netchar_testkit::require;
