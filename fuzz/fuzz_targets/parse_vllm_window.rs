#![no_main]
use libfuzzer_sys::fuzz_target;
use engine::evidence::parsers::parse_vllm_window;

fuzz_target!(|data: &[u8]| {
    let mid = data.len() / 2;
    let _ = parse_vllm_window(&data[..mid], &data[mid..]);
});
