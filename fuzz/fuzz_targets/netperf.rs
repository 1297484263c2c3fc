#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| netchar_fuzz::bodies::netperf::netperf(data));
