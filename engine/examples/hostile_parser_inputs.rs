//! Times the parsers on inputs of about a megabyte shaped to make a careless parser slow: many
//! distinct rank lines, data-parallel engines, restarts, one-line listings, hosts, launcher tags
//! inside rows. Median of five parses each, in milliseconds (docs/benchmarks.md).
//!
//!     cargo run --release -p engine --example hostile_parser_inputs

use engine::evidence::parsers::{parse, EvidenceKind};
use std::time::Instant;

/// `line(i)` repeated until the text passes a megabyte, after `head`.
fn megabyte(head: &str, line: impl Fn(usize) -> String) -> String {
    let mut s = head.to_owned();
    let mut i = 0;
    while s.len() < 1_000_000 {
        s += &line(i);
        i += 1;
    }
    s
}

fn main() {
    const HEADER: &str = "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong";
    let cases = [
        (
            "nccl-tests, a distinct rank a line",
            EvidenceKind::NcclTests,
            megabyte("# nThread 1 nGpus 1\n", |i| {
                format!("#  Rank {i} Group 0 Pid {i} on h{i} device 0 [0x0] GPU{i}\n")
            }) + HEADER
                + "\n 8 2 float sum -1 1 1 1 0 1 1 1 0\n",
        ),
        (
            "vllm-log, a data-parallel engine a line",
            EvidenceKind::VllmLog,
            megabyte("", |i| {
                format!("(EngineCore_DP{i} pid=1) INFO GPU KV cache size: 5 tokens\n")
            }),
        ),
        (
            "vllm-log, a restart every two lines",
            EvidenceKind::VllmLog,
            megabyte("", |i| {
                format!("INFO vLLM API server version 0.9\nINFO GPU KV cache size: {i} tokens\n")
            }),
        ),
        (
            "nvidia-smi -L, every GPU on one line",
            EvidenceKind::NvidiaSmiList,
            megabyte("", |i| format!("GPU {i}: A (UUID: GPU-{i}) ")),
        ),
        (
            "nvidia-smi -L, entries without a UUID on one line",
            EvidenceKind::NvidiaSmiList,
            megabyte("", |_| "x) GPU 1: ".to_owned()),
        ),
        (
            "dcgm-exporter, a host a line",
            EvidenceKind::DcgmExporter,
            megabyte("", |i| {
                format!("DCGM_FI_DEV_GPU_UTIL{{gpu=\"{i}\",Hostname=\"h{i}\"}} 5\n")
            }),
        ),
        (
            "nccl-tests under mpiexec -prepend-rank",
            EvidenceKind::NcclTests,
            megabyte(&format!("[0] {HEADER}\n"), |_| {
                "[0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]    2302.3    0.46    0.87      0\n".to_owned()
            }),
        ),
        (
            "nccl-tests under kubectl --prefix --timestamps",
            EvidenceKind::NcclTests,
            megabyte(&format!("[pod/x/c] 2025-01-01T00:00:00.123456789Z {HEADER}\n"), |_| {
                "[pod/x/c] 2025-01-01T00:00:00.123456789Z  1048576 262144 float sum -1 1626.5 0.64 1.24 0 2302.3 0.46 0.87 0\n"
                    .to_owned()
            }),
        ),
    ];
    for (name, kind, text) in &cases {
        let mut ms: Vec<f64> = (0..5)
            .map(|_| {
                let start = Instant::now();
                let _ = parse(*kind, text.as_bytes());
                start.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        println!(
            "{name}: {} bytes, median {:.1} ms ({:.1}–{:.1})",
            text.len(),
            ms[2],
            ms[0],
            ms[4]
        );
    }
}
