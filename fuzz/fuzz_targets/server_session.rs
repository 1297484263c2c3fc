#![no_main]
libfuzzer_sys::fuzz_target!(|input: netchar_fuzz::bodies::script::ServerInput| netchar_fuzz::bodies::server_session(
    &input
));
