#![no_main]
use libfuzzer_sys::fuzz_target;
use engine::evidence::parsers::{parse_with, EvidenceKind, SloTargets};

// Every serving format with the brief's targets set, so the per-request attainment paths run
// (GenAI-Perf / AIPerf / GuideLLM / SGLang / vLLM readers, `slo::attainment`).
fuzz_target!(|data: &[u8]| {
    let targets = SloTargets {
        ttft_ms: Some(200.0),
        tpot_ms: Some(30.0),
        e2e_ms: Some(3000.0),
    };
    let _ = parse_with(EvidenceKind::BenchServing, data, &targets);
    let _ = parse_with(EvidenceKind::VllmMetrics, data, &targets);
});
