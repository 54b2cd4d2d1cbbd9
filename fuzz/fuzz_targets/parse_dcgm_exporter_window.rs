#![no_main]
use libfuzzer_sys::fuzz_target;
use engine::evidence::parsers::{parse_window, EvidenceKind, SloTargets};

// The input split in two: the `before` and `after` scrapes of a window.
fuzz_target!(|data: &[u8]| {
    let mid = data.len() / 2;
    let _ = parse_window(EvidenceKind::DcgmExporter, &data[..mid], &data[mid..], &SloTargets::default());
});
