#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| netchar_fuzz::bodies::nc_test(data));
