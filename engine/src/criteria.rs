//! What the card evaluation (`acceptance::evaluate`) and the review decision (`review::decision`)
//! both say about one criterion: its status. One type on the ground floor, so the review reads the
//! card's outcome as it is instead of mapping a twin enum variant by variant.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Missing,
    /// The criterion does not apply to the trial's allocation (collectives on one GPU).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Missing => "missing",
            Status::NotApplicable => "n/a",
        }
    }
}

/// What a metric key measures, in words; an unknown key stays as written.
pub fn criterion_name(key: &str) -> String {
    let name = match key {
        "dcgm.diag.passed" => "the GPU health check (DCGM diagnostic)",
        "dcgm.diag.warnings" => "warnings of the GPU health check (DCGM diagnostic)",
        "checkpoint.restore_ok" => "restoring from a checkpoint",
        "checkpoint.restore_seconds" => "the time to restore from a checkpoint",
        "serving.ttft_p50_ms" => "the time to the first token (median)",
        "serving.ttft_p95_ms" => "the time to the first token (95th percentile)",
        "serving.ttft_p99_ms" => "the time to the first token (99th percentile)",
        "serving.itl_p95_ms" => "the time between tokens (95th percentile)",
        "serving.tpot_p95_ms" => "the time per output token of a request (95th percentile)",
        "serving.e2e_p95_ms" => "the time of a whole request (95th percentile)",
        "serving.e2e_p99_ms" => "the time of a whole request (99th percentile)",
        "serving.queue_time_p95_ms" => "the time requests wait in the queue (95th percentile)",
        "serving.error_rate" => "the share of requests that failed",
        "serving.slo_attainment" => "the share of requests inside every target",
        "serving.output_tokens_per_s" => "the rate of output tokens (per second)",
        "serving.request_throughput_rps" => "the rate of requests served (per second)",
        "serving.goodput_rps" => "the rate of requests served inside every target (goodput)",
        "serving.preemptions_total" => "requests pushed out of GPU memory",
        "serving.kv_cache_usage_max_pct" => "the fullest the KV cache got",
        "ledger.cost_per_job" => "the cost per completed job",
        "nccl.busbw_peak_gbps" => "the GPU-to-GPU bandwidth (NCCL, peak)",
        "nccl.busbw_avg_gbps" => "the GPU-to-GPU bandwidth (NCCL, average)",
        "nccl.wrong" => "wrong results in the GPU-to-GPU test (NCCL)",
        "gpu.count" => "the number of GPUs the server shows",
        "gpu.models" => "the GPU models",
        "gpu.memory_total_mib" => "the memory of each GPU",
        "gpu.ecc_errors_uncorrected" => "uncorrected GPU memory errors",
        "gpu.xid_errors" => "GPU driver errors (Xid)",
        "gpu.util_pct_avg" => "the GPUs' average utilization",
        "topo.worst_link" => "the slowest GPU-to-GPU link",
        "topo.nvlink_all_pairs" => "NVLink between every pair of GPUs",
        "manifest.lint_errors" => "problems in the Kubernetes manifest",
        _ => {
            return match key.strip_prefix("probe.") {
                Some(probe) => format!("the probe “{}”", probe.replace('_', " ")),
                None => key.to_owned(),
            }
        }
    };
    name.to_owned()
}

/// The first letter upper-case, for a phrase that starts a sentence.
pub fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::Status;

    #[test]
    fn the_wire_names_are_the_page_names() {
        for s in [Status::Pass, Status::Fail, Status::Missing, Status::NotApplicable] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(serde_json::from_value::<Status>(s.as_str().into()).unwrap(), s);
        }
    }
}
