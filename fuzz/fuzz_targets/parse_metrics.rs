#![no_main]
use libfuzzer_sys::fuzz_target;
use engine::evidence::parsers::{detect_kind, parse, EvidenceKind};

fuzz_target!(|data: &[u8]| {
    let _ = detect_kind(data);
    let _ = parse(EvidenceKind::Metrics, data);
});
