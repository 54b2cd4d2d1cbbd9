//! Conformance over the real tool outputs kept in `tests/fixtures/<kind>/`: every file listed in a
//! folder's PROVENANCE.md as `real` or `adapted` is detected as its folder's kind and parses to the
//! figures a careful reader of the file states (the table below). A listed file that is missing
//! fails the test; so does a fixture without a provenance row, or a real file without expectations.

use rentcheck::evidence::parsers::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

enum V {
    N(f64),
    T(&'static str),
    B(bool),
    L(&'static [&'static str]),
    Len(usize),
    Absent,
}
use V::*;

/// Expected key/values, or Err(line): the parse must fail naming that line.
type Expect = Result<Vec<(&'static str, V)>, usize>;

/// file → expectation
fn table() -> Vec<(&'static str, Expect)> {
    vec![
        (
            "nvidia-smi-list/a100-sxm4-80gb-dgx-a100-mig-mixed-head10.txt",
            Ok(vec![
                ("gpu.count", N(2.0)),
                ("gpu.mig_count", N(8.0)),
                ("gpu.models", L(&["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"])),
            ]),
        ),
        (
            "nvidia-smi-list/h100-80gb-hbm3-x4-one-mig-2g.20gb.txt",
            Ok(vec![
                ("gpu.count", N(4.0)),
                ("gpu.mig_count", N(1.0)),
                ("gpu.mig_profiles", L(&["2g.20gb"])),
                ("gpu.uuids", Len(4)),
            ]),
        ),
        (
            "nvidia-smi-list/rtx-4070-laptop-windows-single.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA GeForce RTX 4070 Laptop GPU"])),
            ]),
        ),
        (
            "nvidia-smi-list/tesla-p100-sxm2-single-slurm-job.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["Tesla P100-SXM2-16GB"])),
            ]),
        ),
        (
            "nvidia-smi-topo/rtx2080ti-x2-pcie-pix-autodl.txt",
            Ok(vec![
                ("topo.gpu_count", N(2.0)),
                ("topo.worst_link", T("PIX")),
                ("topo.nvlink_all_pairs", B(false)),
                ("topo.min_nvlinks", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/h100-sxm5-x8-nv18-1nic-dstack-collect-env.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.nvlink_all_pairs", B(true)),
                ("topo.min_nvlinks", N(18.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/h200-x8-nv18-8nic-node-record.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.min_nvlinks", N(18.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/b200-x8-nv18-16nic-paste-mangled-nccl-tests-333.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.nvlink_all_pairs", B(true)),
            ]),
        ),
        (
            "nvidia-smi-topo/a100-x8-nv12-reformatted-ml-engineering.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV12")),
                ("topo.min_nvlinks", N(12.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/a100-x8-nv12-blank-lines-between-rows.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV12")),
                ("topo.min_nvlinks", N(12.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/b300-x8-nv18-9nic-sglang-check-env-escape-lost.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.nvlink_all_pairs", B(true)),
                ("topo.min_nvlinks", N(18.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/rtx-a6000-x3-nv4-pair-node-siboehm.txt",
            Ok(vec![
                ("topo.gpu_count", N(3.0)),
                ("topo.worst_link", T("NODE")),
                ("topo.nvlink_all_pairs", B(false)),
                ("topo.min_nvlinks", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/a100-sxm4-80gb-x4-mig-driver535-v12.xml",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.attached_gpus", N(4.0)),
                ("gpu.memory_total_mib", N(81920.0)),
                ("gpu.memory_used_mib_max", N(50.0)),
                ("gpu.driver_version", T("535.54.03")),
                ("gpu.cuda_version", T("12.2")),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
                ("gpu.mig_count", N(4.0)),
            ]),
        ),
        (
            "nvidia-smi-query/a100-sxm4-40gb-mig-driver510-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(40960.0)),
                ("gpu.memory_used_mib_max", N(38.0)),
                ("gpu.driver_version", T("510.47.03")),
                ("gpu.cuda_version", T("11.6")),
                ("gpu.mig_count", N(2.0)),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/tesla-t4-driver515-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(15360.0)),
                ("gpu.memory_used_mib_max", N(1032.0)),
                ("gpu.driver_version", T("515.105.01")),
                ("gpu.models", L(&["Tesla T4"])),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/rtx-2080-windows-driver516-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(8192.0)),
                ("gpu.memory_used_mib_max", N(862.0)),
                ("gpu.driver_version", T("516.59")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/rtx-4000-sff-ada-driver595-v13.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(20475.0)),
                ("gpu.memory_used_mib_max", N(3534.0)),
                ("gpu.driver_version", T("595.84")),
                ("gpu.cuda_version", T("13.2")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/tesla-p100-query-gpu.csv",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["Tesla P100-PCIE-16GB"])),
                ("gpu.memory_used_mib_max", N(0.0)),
                ("gpu.memory_total_mib", N(16383.0)),
            ]),
        ),
        (
            "nvidia-smi-query/h200-x8-query-gpu-csv-with-units.csv",
            Ok(vec![
                ("gpu.count", N(8.0)),
                ("gpu.memory_total_mib", N(143771.0)),
                ("gpu.driver_version", T("570.211.01")),
            ]),
        ),
        (
            "dcgm-discovery/h100-sxm-x4-dcgm-3.1.7-name-null-mig.txt",
            Ok(vec![
                ("dcgm.gpu_count", N(4.0)),
                ("gpu.models", L(&["unknown", "unknown", "unknown", "unknown"])),
                ("gpu.uuids", Len(4)),
                ("dcgm.nvswitch_count", N(0.0)),
            ]),
        ),
        (
            "dcgm-discovery/quadro-rtx5000-x4-dcgm-4.4.2-lines-issue-303.txt",
            Ok(vec![
                ("dcgm.gpu_count", N(4.0)),
                ("gpu.models", L(&["Quadro RTX 5000"; 4])),
                ("gpu.uuids", Len(4)),
                ("gpu.pci_bus_ids", Len(4)),
            ]),
        ),
        (
            "dcgm-discovery/a100-sxm4-40gb-x8-6-nvswitches-dcgm-docs.txt",
            Ok(vec![
                ("dcgm.gpu_count", N(8.0)),
                ("dcgm.nvswitch_count", N(6.0)),
                ("gpu.models", Len(8)),
            ]),
        ),
        (
            "dcgm-diag/deepops-r1-deployment-pass-legacy-blacklist.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&[])),
                ("dcgm.diag.tests_run", Len(9)),
                ("dcgm.diag.level", N(1.0)),
            ]),
        ),
        (
            "dcgm-diag/deepops-r1-deployment-fail-legacy-blacklist.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                (
                    "dcgm.diag.failed_tests",
                    L(&[
                        "Persistence Mode",
                        "Environment Variables",
                        "Page Retirement",
                        "Graphics Processes",
                        "Inforom",
                    ]),
                ),
                ("dcgm.diag.level", N(1.0)),
            ]),
        ),
        (
            "dcgm-diag/dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["GPU Memory"])),
                ("dcgm.diag.skipped_tests", L(&["PCIe", "Memory Bandwidth", "EUD Test"])),
                ("dcgm.diag.warnings", N(8.0)),
                ("dcgm.diag.level", N(3.0)),
                ("dcgm.version", T("3.3.8")),
            ]),
        ),
        (
            "dcgm-diag/dcgm-4.2.3-l40s-x4-pcie-fail-internal-error-warnings.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["pcie"])),
                ("dcgm.diag.tests_run", L(&["software", "memory", "pcie"])),
                ("dcgm.diag.warnings", N(4.0)),
                ("dcgm.diag.level", N(2.0)),
            ]),
        ),
        (
            "dcgm-diag/dcgm-4.4.1-b200-x8-r2-pcie-fail.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["pcie"])),
                ("dcgm.diag.warnings", N(1.0)),
                ("dcgm.version", T("4.4.1")),
                ("gpu.driver_version", T("570.172.08")),
            ]),
        ),
        (
            "dcgm-diag/nvvs-3.1.0-json-8gpu-with-nulls-and-preamble-dcgm-test.json.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(true)),
                ("dcgm.diag.tests_run", Len(10)),
                ("dcgm.diag.failed_tests", L(&[])),
                ("dcgm.diag.skipped_tests", L(&[])),
                ("dcgm.version", T("3.1.0")),
            ]),
        ),
        (
            "vllm-log/v0.11.0-mistral-7b-gptq-dgx-spark-nvidia-25.11.log",
            // The KV-cache lines are the engine core's `(EngineCore_DP0 pid=164)`, fewer than the
            // API server's: processes of one server, not machines, so none is dropped.
            Ok(vec![
                ("serving.kv_cache_tokens", N(840_160.0)),
                ("serving.max_concurrency", N(25.64)),
                ("serving.max_concurrency_tokens_per_request", N(32_768.0)),
                // Logged only when not the default (0.9 here): not invented.
                ("serving.gpu_memory_utilization", Absent),
            ]),
        ),
        (
            "vllm-log/v0.10.1-gpt-oss-120b-tp4-4x-a100-80gb-gmu0.8.log",
            Ok(vec![
                ("serving.kv_cache_tokens", N(2_640_144.0)),
                ("serving.max_concurrency", N(284.25)),
                ("serving.max_concurrency_tokens_per_request", N(16_384.0)),
                ("serving.gpu_memory_utilization", N(0.8)),
            ]),
        ),
        (
            "vllm-metrics/datadog-fixture-vllm-v0.5-opt-125m-original-capture.txt",
            Ok(vec![
                ("serving.ttft_p50_ms", N(375.0)),
                ("serving.ttft_p95_ms", N(487.5)),
                ("serving.ttft_p99_ms", N(497.5)),
                ("serving.itl_p95_ms", N(48.75)),
                ("serving.e2e_p95_ms", N(950.0)),
                ("serving.e2e_p99_ms", N(990.0)),
                ("serving.requests_total", N(1.0)),
                ("serving.preemptions_total", N(0.0)),
                ("serving.kv_cache_usage_max_pct", N(0.0)),
                ("serving.requests_waiting_max", N(0.0)),
                ("serving.by_model.facebook/opt-125m.ttft_p95_ms", N(487.5)),
                ("vllm.family.itl", T("vllm:time_per_output_token_seconds")),
                // v0.5 has no per-request time-per-output-token histogram: nothing to judge the
                // inter-token target with, and the per-gap figure is not used in its place.
                ("serving.tpot_p95_ms", Absent),
            ]),
        ),
        (
            "vllm-metrics/datadog-fixture-vllm-opt-125m-augmented-v1-metric-names.txt",
            Ok(vec![
                ("serving.ttft_p95_ms", N(487.5)),
                ("serving.itl_p95_ms", N(0.01 * 136.8 / 141.0 * 1000.0)),
                // `request_time_per_output_token_seconds`: all 6 requests in the first bucket (le
                // 0.01 s), so p50 / p95 / p99 are 3 / 5.7 / 5.94 of 6 across 0–10 ms.
                ("serving.tpot_p50_ms", N(5.0)),
                ("serving.tpot_p95_ms", N(9.5)),
                ("serving.tpot_p99_ms", N(9.9)),
                ("serving.queue_time_p95_ms", N(285.0)),
                ("serving.prefill_p95_ms", N(285.0)),
                ("serving.decode_p95_ms", N(285.0)),
                ("serving.kv_cache_usage_max_pct", N(0.0)),
                ("vllm.family.itl", T("vllm:inter_token_latency_seconds")),
                ("vllm.family.kv_cache_usage_max_pct", T("vllm:kv_cache_usage_perc")),
            ]),
        ),
        (
            "bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json",
            Ok(vec![
                ("serving.completed", N(200.0)),
                ("serving.error_rate", N(0.0)),
                ("serving.request_throughput_rps", N(8.398304797910107)),
                ("serving.output_tokens_per_s", N(1780.3566341089636)),
                ("serving.ttft_p50_ms", N(349.84637349998593)),
                ("serving.ttft_p99_ms", N(450.3786364301777)),
                ("serving.itl_p99_ms", N(43.595131400124956)),
                ("serving.tpot_p99_ms", N(75.76524432244929)),
                ("serving.e2e_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/vllm-benchmark-serving-console-llama3.3-70b-tp8-qps-inf.txt",
            Ok(vec![
                ("serving.completed", N(200.0)),
                ("serving.request_throughput_rps", N(8.40)),
                ("serving.ttft_p50_ms", N(349.85)),
                ("serving.ttft_p99_ms", N(450.38)),
                ("serving.itl_p99_ms", N(43.60)),
                ("serving.ttft_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/vllm-nightly-benchmark-results-table-tp8-8xa100.json",
            Ok(vec![
                ("serving.run", T("tp8_pp1_qps_inf")),
                ("serving.request_throughput_rps", N(8.398304797910107)),
                ("serving.by_run.tp8_pp1_qps_01.ttft_p99_ms", N(143.80068917976584)),
                // `# of req.` is vLLM's `completed` (its table script's column mapping).
                ("serving.completed", N(200.0)),
                ("serving.by_run.tp8_pp1_qps_04.completed", N(200.0)),
            ]),
        ),
        (
            "bench-serving/sglang-console-nonstreaming-rate-sweep-dlora.txt",
            Ok(vec![
                ("serving.completed", N(996.0)),
                // The un-suffixed keys are the run of the highest throughput (the second block).
                ("serving.ttft_p99_ms", N(12291.71)),
                // A run without streaming measured no ITL: its 0.00s are left out.
                ("serving.itl_p99_ms", Absent),
                ("serving.itl_mean_ms", Absent),
            ]),
        ),
        (
            "bench-serving/vllm-bench-serve-sglang-pd-gpt-oss-120b-8xh200-conc64.json",
            Ok(vec![
                ("serving.completed", N(500.0)),
                ("serving.load_concurrency", N(64.0)),
                // The client's --max-concurrency, not the KV cache's concurrency of vLLM's start-up log.
                ("serving.max_concurrency", Absent),
                ("serving.ttft_p99_ms", N(270.15254137986625)),
                ("serving.itl_p99_ms", N(11.68369915998484)),
                ("serving.output_tokens_per_s", N(6483.451381493163)),
                ("serving.ttft_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/llmperf-summary-fireworks-llama2-70b.json",
            Ok(vec![
                ("serving.ttft_p50_ms", N(516.5989695000235)),
                ("serving.ttft_p95_ms", N(786.8415615500112)),
                ("serving.itl_p95_ms", N(27.247_985_558_942_86)),
                ("serving.e2e_p95_ms", N(4210.630839049929)),
                ("serving.completed", N(150.0)),
                ("serving.error_rate", N(0.0)),
                ("serving.output_tokens_per_s", N(162.86950633872)),
            ]),
        ),
        (
            "bench-serving/genai-perf-analyze-export-gpt2-triton.csv",
            Ok(vec![
                ("serving.run", T("gpt2_run_config_3")),
                ("serving.ttft_p99_ms", N(184.43)),
                ("serving.itl_p99_ms", N(30.90)),
                ("serving.e2e_p99_ms", N(3406.24)),
                ("serving.request_throughput_rps", N(10.12)),
                ("serving.by_run.gpt2_run_config_2.request_throughput_rps", N(9.83)),
            ]),
        ),
        (
            "nccl-tests/h100-80gb-x16-2node-a3mega-all_reduce_perf.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(338.82)),
                ("nccl.busbw_avg_gbps", N(70.742)),
                ("nccl.world_size", N(16.0)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(4.00)),
                ("nccl.busbw_avg_gbps", N(2.05774)),
                ("nccl.world_size", N(2.0)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/rtx2080ti-x2-pcie-alltoall_perf-na-wrong.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(4.61)),
                ("nccl.busbw_avg_gbps", N(2.06935)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/a100-dgx-4node-32gpu-all_reduce_perf-legacy-error-column.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(191.05)),
                ("nccl.busbw_avg_gbps", N(113.289)),
                ("nccl.wrong", N(0.0)),
                ("nccl.world_size", Absent),
            ]),
        ),
        (
            "nccl-tests/h100-x8-all_reduce_perf-cuda-init-failure.txt",
            Ok(vec![
                ("nccl.run_failed", B(true)),
                ("nccl.busbw_peak_gbps", Absent),
                ("nccl.busbw_avg_gbps", Absent),
            ]),
        ),
        // ---- formats added later ----
        (
            "bench-serving/genai-perf-profile-export-trtllm-c100-streaming-perf-analyzer-298.json",
            Ok(vec![
                ("serving.request_throughput_rps", N(17.222547659562533)),
                ("serving.output_tokens_per_s", N(44190.56002502682)),
                ("serving.ttft_p50_ms", N(172.8093975)),
                ("serving.ttft_p99_ms", N(425.02943662)),
                ("serving.itl_p95_ms", N(2.2451001999999995)),
                // GenAI-Perf's inter-token latency is per request: vLLM's TPOT, which the SLO judges.
                ("serving.tpot_p95_ms", N(2.2451001999999995)),
                ("serving.e2e_p95_ms", N(5892.6711992499995)),
                ("serving.load_concurrency", N(100.0)),
                // GenAI-Perf's summary has no request counts: nothing is made up for them.
                ("serving.completed", Absent),
                ("serving.error_rate", Absent),
            ]),
        ),
        (
            // 100 requests with 10 % cancellation: 89 completed ("request_count"), 11 cancelled by
            // the client (error_summary: 499 RequestCancellationError), figures under "records".
            "bench-serving/aiperf-profile-export-gpt-oss-20b-c100-cancellation10.json",
            Ok(vec![
                ("serving.completed", N(89.0)),
                ("serving.error_rate", N(0.11)),
                ("serving.request_throughput_rps", N(9.551622221540914)),
                ("serving.output_tokens_per_s", N(2320.7222350404572)),
                ("serving.ttft_p50_ms", N(2369.317693)),
                ("serving.ttft_p99_ms", N(3833.3894000399996)),
                ("serving.itl_p95_ms", N(33.34450986349594)),
                ("serving.e2e_p50_ms", N(9097.345014999999)),
                ("serving.load_concurrency", N(100.0)),
                ("serving.model", T("openai/gpt-oss-20b")),
            ]),
        ),
        (
            // The same run's CSV export: statistics rounded to two decimals, then the run's totals.
            "bench-serving/aiperf-profile-export-gpt-oss-20b-c100-cancellation10.csv",
            Ok(vec![
                ("serving.completed", N(89.0)),
                ("serving.error_rate", N(0.11)),
                ("serving.request_throughput_rps", N(9.55)),
                ("serving.output_tokens_per_s", N(2320.72)),
                ("serving.ttft_p50_ms", N(2369.32)),
                ("serving.ttft_p99_ms", N(3833.39)),
                ("serving.itl_p95_ms", N(33.34)),
                ("serving.e2e_p50_ms", N(9097.35)),
            ]),
        ),
        (
            "bench-serving/aiperf-profile-export-qwen3.6-nvfp4-rtx5090-c16.json",
            Ok(vec![
                ("serving.completed", N(96.0)),
                ("serving.error_rate", N(0.0)),
                ("serving.request_throughput_rps", N(2.156207775934887)),
                ("serving.output_tokens_per_s", N(1172.145991694937)),
                ("serving.ttft_p50_ms", N(177.785533)),
                ("serving.ttft_p95_ms", N(672.0477902499999)),
                ("serving.itl_p99_ms", N(13.272469915788289)),
                ("serving.tpot_p99_ms", N(13.272469915788289)),
                ("serving.e2e_p50_ms", N(6478.6263245)),
                ("serving.load_concurrency", N(16.0)),
                ("serving.model", T("qwen3.6-nvfp4")),
            ]),
        ),
        (
            "bench-serving/aiperf-profile-export-records-from-docs.jsonl",
            Ok(vec![
                // one record succeeded, one was cancelled
                ("serving.completed", N(1.0)),
                ("serving.failed", N(1.0)),
                ("serving.error_rate", N(0.5)),
                ("serving.ttft_p50_ms", N(255.88656799999998)),
                ("serving.e2e_p50_ms", N(297.52522799999997)),
                ("serving.itl_p50_ms", N(5.2048325)),
            ]),
        ),
        (
            // Lines 1 and 5 of the real sweep, the second with `"request_rate": Infinity` and
            // `"median_itl_ms": NaN` as Python writes them: read, not skipped.
            "bench-serving/sglang-bench-serving-request-rate-infinity-nan.jsonl",
            Ok(vec![
                ("serving.run", T("rate_inf")),
                ("serving.completed", N(3200.0)),
                // 3,200 completed / 383.073250005953 s
                ("serving.request_throughput_rps", N(3200.0 / 383.073250005953)),
                ("serving.ttft_p50_ms", N(614.2499720444903)),
                ("serving.e2e_mean_ms", N(149037.25147111146)),
                ("serving.itl_p50_ms", Absent),
                ("serving.offered_rps", Absent),
                ("serving.by_run.rate_1.completed", N(300.0)),
            ]),
        ),
        (
            "bench-serving/sglang-bench-serving-llama3.3-70b-h200-rate-sweep.jsonl",
            Ok(vec![
                // seven lines, one per request rate; the top-level figures are the busiest run's
                ("serving.run", T("rate_16")),
                ("serving.backend", T("sglang")),
                ("serving.completed", N(3200.0)),
                ("serving.request_throughput_rps", N(8.35349375073898)),
                ("serving.ttft_p50_ms", N(614.2499720444903)),
                ("serving.by_run.rate_1.completed", N(300.0)),
                ("serving.by_run.rate_1.ttft_p50_ms", N(85.74514742940664)),
                ("serving.by_run.rate_1.itl_p50_ms", N(13.638956006616354)),
                ("serving.by_run.rate_8.request_throughput_rps", N(6.9209068561634055)),
                // the same rate run twice keeps both, the second named by its line
                (
                    "serving.by_run.rate_8_run7.request_throughput_rps",
                    N(7.644092458338431),
                ),
            ]),
        ),
        (
            "dcgm-exporter/kops-l4-idle-scrape-dcgm-exporter-driver580.txt",
            Ok(vec![
                ("dcgm_exporter.gpus", N(1.0)),
                ("gpu.models", L(&["NVIDIA L4"])),
                ("gpu.driver_version", T("580.105.08")),
                ("gpu.util_pct_avg", N(0.0)),
                ("gpu.util_source", T("DCGM_FI_DEV_GPU_UTIL")),
                ("gpu.memory_used_mib_max", N(0.0)),
                ("gpu.power_w_max", N(16.365)),
                ("gpu.temp_c_max", N(31.0)),
                ("gpu.uncorrectable_remapped_rows", N(0.0)),
                // this exporter's counter list has no ECC fields: unknown, not zero
                ("gpu.ecc_errors_uncorrected", Absent),
                // one scrape is not a window: no energy figure
                ("gpu.energy_joules", Absent),
            ]),
        ),
        (
            "dcgm-exporter/l4-window-after.txt",
            Ok(vec![
                ("gpu.util_pct_avg", N(87.0)),
                ("gpu.memory_used_mib_max", N(20310.0)),
                ("gpu.power_w_max", N(68.905)),
                ("gpu.temp_c_max", N(63.0)),
            ]),
        ),
        (
            "dcgm-exporter/l4-window-before.txt",
            Ok(vec![("gpu.util_pct_avg", N(0.0)), ("gpu.power_w_max", N(16.365))]),
        ),
        (
            "nvidia-smi-query/a10-table-driver550-gpud.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA A10"])),
                ("gpu.memory_total_mib", N(23028.0)),
                ("gpu.memory_used_mib_max", N(1.0)),
                ("gpu.driver_version", T("550.127.05")),
                ("gpu.cuda_version", T("12.4")),
                // the table's "Volatile Uncorr. ECC" column, 0
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/rtx2080ti-x2-table-driver550-autodl.txt",
            Ok(vec![
                ("gpu.count", N(2.0)),
                (
                    "gpu.models",
                    L(&["NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 Ti"]),
                ),
                ("gpu.memory_total_mib", N(11264.0)),
                ("gpu.driver_version", T("550.90.07")),
                // N/A in the table: GeForce cards have no ECC
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/h100-mig-table-driver590-ecc-on-gpu-exporter.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.memory_total_mib", N(81559.0)),
                ("gpu.driver_version", T("590.48.01")),
                // the ECC cell reads `On` (MIG mode); its four MIG devices' `Vol Unc ECC` are 0
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/rtx2080super-table-driver610-kmd-gpu-exporter.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.memory_total_mib", N(8192.0)),
                ("gpu.memory_used_mib_max", N(211.0)),
                ("gpu.driver_version", T("610.57.04")),
                ("gpu.cuda_version", T("13.3")),
            ]),
        ),
        (
            "nvidia-smi-query/rtx2080super-q-text-driver610-deprecated-gpu-exporter.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA GeForce RTX 2080 SUPER"])),
                ("gpu.memory_total_mib", N(8192.0)),
                // without the `[Deprecated; …]` note that follows both
                ("gpu.driver_version", T("610.57.04")),
                ("gpu.cuda_version", T("13.3")),
            ]),
        ),
        (
            "nvidia-smi-query/rtx2080super-query-gpu-241-fields-driver610-gpu-exporter.csv",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA GeForce RTX 2080 SUPER"])),
                ("gpu.memory_total_mib", N(8192.0)),
                ("gpu.memory_used_mib_max", N(211.0)),
                ("gpu.driver_version", T("610.57.04")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/rtx3070-table-530-layout-windows-cs259.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.memory_total_mib", N(8192.0)),
                ("gpu.memory_used_mib_max", N(1029.0)),
                ("gpu.driver_version", T("531.68")),
                ("gpu.cuda_version", T("12.1")),
            ]),
        ),
        (
            "nvidia-smi-query/titan-v-table-old-layout-driver515-cs259.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA TITAN V"])),
                ("gpu.memory_total_mib", N(12288.0)),
                ("gpu.driver_version", T("515.65.01")),
                ("gpu.cuda_version", T("11.7")),
            ]),
        ),
        (
            "nvidia-smi-query/a10-q-text-driver550-gpud.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.attached_gpus", N(1.0)),
                ("gpu.models", L(&["NVIDIA A10"])),
                ("gpu.memory_total_mib", N(23028.0)),
                ("gpu.driver_version", T("550.127.05")),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
                ("gpu.uuids", L(&["GPU-51ae0086-e1ac-4a20-f062-9caa44e4df6d"])),
            ]),
        ),
        (
            "nvidia-smi-query/rtx4070-laptop-q-text-windows-driver566.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.memory_total_mib", N(8188.0)),
                ("gpu.driver_version", T("566.36")),
                ("gpu.cuda_version", T("12.7")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/h100-x8-query-gpu-ecc-virtualclient.csv",
            Ok(vec![
                ("gpu.count", N(8.0)),
                ("gpu.memory_total_mib", N(81559.0)),
                ("gpu.driver_version", T("535.161.07")),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/h100-x8-query-gpu-volatile-ecc-only-from-virtualclient.csv",
            Ok(vec![("gpu.count", N(8.0)), ("gpu.ecc_errors_uncorrected", N(0.0))]),
        ),
        (
            "nccl-tests/h100-x8-all_reduce_perf-nvls-nccl-tests-290.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(473.60)),
                ("nccl.world_size", N(8.0)),
                ("nccl.nodes", N(1.0)),
                ("nccl.gpu_model", T("NVIDIA H100 80GB HBM3")),
                ("nccl.expected_busbw_gbps", N(476.0)),
                ("nccl.busbw_pct_of_expected", N(473.60 / 476.0 * 100.0)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/h100-x16-2node-srun-l-nccl-tests-290.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(166.22)),
                ("nccl.world_size", N(16.0)),
                ("nccl.nodes", N(2.0)),
                // no NIC lines: 8 NICs x 400 Gb/s per node assumed, 47 GB/s bus bandwidth each
                ("nccl.expected_busbw_gbps", N(8.0 * 47.0)),
                ("nccl.busbw_pct_of_expected", N(166.22 / 376.0 * 100.0)),
            ]),
        ),
        (
            // The real 2-node run above with 64 PMIX ERROR / libfabric lines of every rank before the
            // banner and NCCL INFO lines inside the table: the same figures, found by kind=auto.
            "nccl-tests/h100-x16-2node-srun-l-pmix-libfabric-nccl-info.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(166.22)),
                ("nccl.busbw_avg_gbps", N(142.735)),
                ("nccl.world_size", N(16.0)),
                ("nccl.nodes", N(2.0)),
                ("nccl.expected_busbw_gbps", N(8.0 * 47.0)),
            ]),
        ),
        (
            "nccl-tests/h200-x16-2node-all_gather-gcp-rdma-skypilot.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(325.52)),
                ("nccl.busbw_avg_gbps", N(121.902)),
                ("nccl.world_size", N(16.0)),
                ("nccl.nodes", N(2.0)),
                ("nccl.gpu_model", T("NVIDIA H200")),
            ]),
        ),
        (
            "nccl-tests/h200-x16-2node-all_gather-ray-mpirun-tag-output-skypilot.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(325.72)),
                ("nccl.busbw_avg_gbps", N(122.073)),
                ("nccl.world_size", N(16.0)),
                ("nccl.nodes", N(2.0)),
            ]),
        ),
        (
            "nccl-tests/t4-x2-efa-eks-mpirun-tag-output-blueprints.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(3.15)),
                ("nccl.busbw_avg_gbps", N(1.15327)),
                ("nccl.world_size", N(2.0)),
                ("nccl.nodes", N(2.0)),
                ("nccl.gpu_model", T("Tesla T4")),
                // NCCL INFO names one 100 Gb/s EFA NIC per node: 11.75 GB/s
                ("nccl.expected_busbw_gbps", N(11.75)),
            ]),
        ),
        (
            "nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf-kubectl-prefix.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(4.00)),
                ("nccl.busbw_avg_gbps", N(2.05774)),
                ("nccl.world_size", N(2.0)),
            ]),
        ),
        (
            "dcgm-diag/dcgm-4.4.1-b200-x8-r2-pcie-fail-printed-twice.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["pcie"])),
                // the same three tests and one warning as the table printed once
                ("dcgm.diag.tests_run", L(&["software", "memory", "pcie"])),
                ("dcgm.diag.warnings", N(1.0)),
                ("dcgm.version", T("4.4.1")),
            ]),
        ),
    ]
}

fn fixtures_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Where a fixture came from, as its folder's PROVENANCE.md says.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Origin {
    Real,
    Adapted,
    Synthetic,
}

/// folder → file → origin, from every `tests/fixtures/*/PROVENANCE.md` table.
fn provenance() -> BTreeMap<String, BTreeMap<String, Origin>> {
    let mut all = BTreeMap::new();
    for d in std::fs::read_dir(fixtures_root()).expect("tests/fixtures is missing") {
        let d = d.unwrap().path();
        if !d.is_dir() {
            continue;
        }
        let folder = d.file_name().unwrap().to_string_lossy().to_string();
        // Evidence fixtures live in a folder per kind; other folders (model-configs/: sizing's
        // config.json files) keep their own provenance in their own form.
        if !EvidenceKind::ALL.iter().any(|k| k.as_str() == folder) {
            continue;
        }
        let prov = d.join("PROVENANCE.md");
        let text = std::fs::read_to_string(&prov)
            .unwrap_or_else(|e| panic!("{}: {e} (every fixture folder keeps one)", prov.display()));
        let mut files = BTreeMap::new();
        let mut sources = Vec::new();
        for row in text.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let file = cells[1].trim_matches('`').to_string();
            let origin = match cells[2] {
                "real" => Origin::Real,
                "adapted" => Origin::Adapted,
                "synthetic" => Origin::Synthetic,
                other => panic!("{folder}/PROVENANCE.md: {file}: unknown origin {other:?}"),
            };
            assert!(
                files.insert(file.clone(), origin).is_none(),
                "{folder}/{file} listed twice"
            );
            sources.push((file, origin, cells[3].to_string()));
        }
        // A real file names where it came from (a commit or an issue URL); an adapted one names
        // that, or the real file in this folder it was made from.
        for (file, origin, source) in &sources {
            let made_from_real = || {
                files
                    .iter()
                    .any(|(f, o)| *o == Origin::Real && source.contains(&format!("`{f}`")))
            };
            let cited = names_a_commit(source) || source.contains("https://");
            let ok = match origin {
                Origin::Real => cited,
                Origin::Adapted => cited || made_from_real(),
                Origin::Synthetic => true,
            };
            assert!(
                ok,
                "{folder}/{file} ({origin:?}): the source does not say where it came from: {source:?}"
            );
        }
        all.insert(folder, files);
    }
    all
}

/// A 40-hex-digit git commit somewhere in the source cell.
fn names_a_commit(source: &str) -> bool {
    source.split(|c: char| !c.is_ascii_hexdigit()).any(|w| w.len() == 40)
}

fn check(rel: &str, p: &Parsed, pairs: &[(&'static str, V)]) {
    for (k, v) in pairs {
        let got = p.metrics.get(*k);
        match (v, got) {
            (N(w), Some(MetricValue::Number(g))) => {
                assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{rel}: {k} = {g}, want {w}")
            }
            (T(w), Some(MetricValue::Text(g))) => assert_eq!(g, w, "{rel}: {k}"),
            (B(w), Some(MetricValue::Bool(g))) => assert_eq!(g, w, "{rel}: {k}"),
            (L(w), Some(MetricValue::List(g))) => assert_eq!(g, w, "{rel}: {k}"),
            (Len(w), Some(MetricValue::List(g))) => assert_eq!(g.len(), *w, "{rel}: {k}"),
            (Absent, None) => {}
            _ => panic!("{rel}: {k}: got {got:?}"),
        }
    }
}

#[test]
fn real_fixtures_expected_values() {
    let prov = provenance();
    for (rel, want) in table() {
        let (folder, file) = rel.split_once('/').unwrap();
        let origin = prov.get(folder).and_then(|f| f.get(file));
        assert!(
            matches!(origin, Some(Origin::Real | Origin::Adapted)),
            "{rel}: listed as {origin:?} in {folder}/PROVENANCE.md; the table is for real outputs"
        );
        let path = fixtures_root().join(rel);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let kind: EvidenceKind = folder.parse().unwrap();
        assert_eq!(detect_kind(&bytes), Some(kind), "{rel}: detected kind");
        let res = parse(kind, &bytes);
        match want {
            Err(line) => assert_eq!(res.unwrap_err().line, Some(line), "{rel}"),
            Ok(pairs) => check(rel, &res.unwrap_or_else(|e| panic!("{rel}: {e}")), &pairs),
        }
    }
}

#[test]
fn every_fixture_has_provenance_and_every_real_one_has_expectations() {
    let prov = provenance();
    let listed: Vec<&str> = table().iter().map(|(r, _)| *r).collect();
    let mut real = 0;
    for (folder, files) in &prov {
        let dir = fixtures_root().join(folder);
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().to_string())
            .filter(|f| f != "PROVENANCE.md")
            .collect();
        on_disk.sort();
        let in_table: Vec<String> = files.keys().cloned().collect();
        assert_eq!(on_disk, in_table, "{folder}: files on disk vs rows in PROVENANCE.md");
        for (file, origin) in files {
            if *origin != Origin::Synthetic {
                real += 1;
                let rel = format!("{folder}/{file}");
                assert!(
                    listed.contains(&rel.as_str()),
                    "{rel} is real but has no expected values"
                );
            }
        }
    }
    // The real samples this repository keeps (a lost folder must not pass quietly).
    assert!(real >= 50, "only {real} real or adapted fixtures found");
    for kind in EvidenceKind::ALL {
        // The project's own formats are synthetic by nature.
        if matches!(
            kind,
            EvidenceKind::Log | EvidenceKind::Metrics | EvidenceKind::Probe | EvidenceKind::CheckpointRestore
        ) {
            continue;
        }
        let has_real = prov
            .get(kind.as_str())
            .is_some_and(|f| f.values().any(|o| *o == Origin::Real));
        assert!(has_real, "no real sample for {kind}");
    }
}

#[test]
fn every_real_file_parses_or_fails_cleanly_when_cut() {
    for (folder, files) in provenance() {
        for (file, _) in files {
            let rel = format!("{folder}/{file}");
            let bytes = std::fs::read(fixtures_root().join(&rel)).unwrap();
            // no panic for any kind, and a truncated copy must parse or fail with a message
            for k in EvidenceKind::ALL {
                let _ = parse(k, &bytes);
                let half = &bytes[..bytes.len() / 2];
                if let Err(e) = parse(k, half) {
                    assert!(!e.message.is_empty(), "{rel} as {k}");
                }
            }
        }
    }
}
