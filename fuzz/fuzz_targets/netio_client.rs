#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| netchar_fuzz::bodies::netio_client(data));
