#![no_main]
libfuzzer_sys::fuzz_target!(|input: netchar_fuzz::bodies::script::ClientInput| netchar_fuzz::bodies::client_session(
    &input
));
