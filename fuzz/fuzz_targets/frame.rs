#![no_main]
libfuzzer_sys::fuzz_target!(|input: netchar_fuzz::bodies::FrameInput| netchar_fuzz::bodies::frame(&input));
