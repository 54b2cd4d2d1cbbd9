//! Predicted KV-cache capacity beside the one vLLM logged at start-up for a trial
//! (`serving.kv_cache_tokens`, `serving.max_concurrency`), and whether the measured one holds
//! what the brief needs: `concurrency` sequences of `context_length` tokens.
//!
//! The check is at the brief's context: the sequences the measured cache holds are its tokens ÷ the
//! brief's `context_length`. vLLM's own "maximum concurrency for N tokens per request" is at its
//! `max_model_len`, which may be another length than the brief's: it is shown, never compared. A
//! finding fires only when the cache is short at the brief's context, or when the server was
//! started for shorter requests than the brief's context.

use serde::Serialize;

use super::{kv_capacity, GpuSpec, KvCapacity, SizingInput};

/// vLLM's default `gpu_memory_utilization`, used when the log does not name one.
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;

/// What vLLM's start-up log said about the KV cache (each figure when the log had its line).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KvMeasured {
    pub tokens: Option<u64>,
    pub max_concurrency: Option<f64>,
    /// The request length `max_concurrency` was computed for (vLLM's `max_model_len`).
    pub tokens_per_request: Option<u64>,
    pub gpu_memory_utilization: Option<f64>,
}

impl KvMeasured {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.max_concurrency.is_none()
    }

    /// The measured cache in tokens: the logged size, else vLLM's concurrency × its request length.
    /// Where both are logged and the concurrency holds clearly more (beyond its two decimals and
    /// 1 %), the model is hybrid or sliding-window, whose token line vLLM logs too small
    /// (vllm-project/vllm#40691), and the concurrency, which its scheduler goes by, is taken.
    pub fn capacity_tokens(&self) -> Option<u64> {
        let from_concurrency = || {
            let c = self.max_concurrency.filter(|c| c.is_finite() && *c >= 0.0)?;
            let len = self.tokens_per_request? as f64;
            Some((c * len, len))
        };
        match (self.tokens, from_concurrency()) {
            (Some(t), Some((implied, len))) if token_line_too_small(t as f64, implied, len) => {
                Some(implied.floor() as u64)
            }
            (Some(t), _) => Some(t),
            (None, c) => c.map(|(implied, _)| implied.floor() as u64),
        }
    }
}

/// Whether vLLM's logged KV-cache tokens fall clearly short of its concurrency × request length
/// (`implied`), beyond the concurrency's two decimals and 1 %: the token line of a hybrid or
/// sliding-window model, which vLLM computes too small (vllm-project/vllm#40691). The parser warns
/// and the check takes the concurrency by this one rule.
pub fn token_line_too_small(tokens: f64, implied: f64, length: f64) -> bool {
    implied - tokens > 0.01 * length + 0.01 * implied
}

/// The comparison for one allocation.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct KvCheck {
    pub gpu: String,
    pub count: u32,
    /// The utilisation the prediction used: the logged one, else vLLM's default.
    pub gpu_memory_utilization: f64,
    pub predicted_tokens: u64,
    pub predicted_max_concurrency: f64,
    pub measured_tokens: Option<u64>,
    pub measured_max_concurrency: Option<f64>,
    pub measured_tokens_per_request: Option<u64>,
    /// Sequences of the brief's context the measured cache holds: its tokens ÷ the context.
    pub measured_sequences_at_context: Option<f64>,
    /// The brief's context length, tokens.
    pub context_length: u64,
    /// measured ÷ predicted tokens, when both exist.
    pub ratio: Option<f64>,
    /// The brief's concurrency × context length.
    pub needed_tokens: u64,
    pub needed_concurrency: u64,
    /// Plain sentences about a measured capacity below what the brief needs (empty when it
    /// holds, or nothing was measured).
    pub findings: Vec<String>,
}

impl KvCheck {
    pub fn short(&self) -> bool {
        !self.findings.is_empty()
    }

    /// The allocation is under-sized for the brief's concurrency: the measured cache is short, or
    /// (nothing measured) the predicted cache holds fewer of the brief's sequences than it runs at
    /// once. One plain sentence for the brief page, the trial and the review; `None` when it holds.
    pub fn room_warning(&self) -> Option<String> {
        if let Some(first) = self.findings.first() {
            return Some(format!("Under-sized for the brief: {first}"));
        }
        let needed = self.needed_concurrency as f64;
        (self.measured_sequences_at_context.is_none() && self.predicted_max_concurrency < needed).then(|| {
            format!(
                "Under-sized for the brief: the KV cache of {} × {} has room for {:.1} of the {} requests of {} \
                 tokens the brief runs at once (predicted), so expect queueing or preempted requests at full load.",
                self.count,
                self.gpu,
                self.predicted_max_concurrency,
                thousands(self.needed_concurrency),
                self.context_text(),
            )
        })
    }

    // Figures as the pages print them.
    pub fn predicted_tokens_text(&self) -> String {
        thousands(self.predicted_tokens)
    }
    pub fn predicted_concurrency_text(&self) -> String {
        format!("{:.1}", self.predicted_max_concurrency)
    }
    pub fn measured_tokens_text(&self) -> String {
        self.measured_tokens.map(thousands).unwrap_or_else(|| "—".into())
    }
    pub fn measured_concurrency_text(&self) -> String {
        self.measured_sequences_at_context
            .map(|c| format!("{c:.1}"))
            .unwrap_or_else(|| "—".into())
    }
    /// vLLM's own figure at its own request length: "15.7 sequences of 40,960 tokens".
    pub fn vllm_concurrency_text(&self) -> String {
        match (self.measured_max_concurrency, self.measured_tokens_per_request) {
            (Some(c), Some(len)) => format!("{c:.1} sequences of {} tokens (its max_model_len)", thousands(len)),
            (Some(c), None) => format!("{c:.1} sequences of its own maximum length"),
            _ => String::new(),
        }
    }
    pub fn context_text(&self) -> String {
        thousands(self.context_length)
    }
    pub fn needed_tokens_text(&self) -> String {
        thousands(self.needed_tokens)
    }
    /// "0.52 × the prediction", or empty without a measurement.
    pub fn ratio_text(&self) -> String {
        self.ratio.map(|r| format!("{r:.2} ×")).unwrap_or_default()
    }
    pub fn utilisation_text(&self) -> String {
        format!("{:.2}", self.gpu_memory_utilization)
    }
}

fn thousands(n: u64) -> String {
    crate::figures::count(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The check for `count` × `gpu`; `None` when the sizing predicts no KV cache for it (no layout
/// loads, or the workload caches nothing).
pub fn kv_check(input: &SizingInput, gpu: &GpuSpec, count: u32, measured: &KvMeasured) -> Option<KvCheck> {
    let utilisation = measured
        .gpu_memory_utilization
        .filter(|u| *u > 0.0 && *u <= 1.0)
        .unwrap_or(DEFAULT_GPU_MEMORY_UTILIZATION);
    let KvCapacity {
        tokens,
        max_concurrency,
    } = kv_capacity(input, gpu, count, utilisation)?;
    let needed_concurrency = input.concurrency.max(1);
    let needed_tokens = needed_concurrency * input.context_length;
    let mut findings = Vec::new();
    if let Some(len) = measured.tokens_per_request.filter(|l| *l < input.context_length) {
        findings.push(format!(
            "The server was started for requests of at most {} tokens; the brief needs {}.",
            thousands(len),
            thousands(input.context_length)
        ));
    }
    let tokens_measured = measured.capacity_tokens();
    let context = input.context_length.max(1);
    let sequences = tokens_measured.map(|t| t as f64 / context as f64);
    if let (Some(t), Some(held)) = (tokens_measured, sequences) {
        if t < needed_tokens {
            findings.push(format!(
                "vLLM's KV cache holds {} tokens: {held:.2} sequences of the brief's {} tokens, and the brief needs \
                 {needed_concurrency} at once ({} tokens), so requests will queue or be preempted.",
                thousands(t),
                thousands(input.context_length),
                thousands(needed_tokens)
            ));
        }
    }
    Some(KvCheck {
        gpu: gpu.model.clone(),
        count,
        gpu_memory_utilization: utilisation,
        predicted_tokens: tokens,
        predicted_max_concurrency: max_concurrency,
        measured_tokens: measured.tokens,
        measured_max_concurrency: measured.max_concurrency,
        measured_tokens_per_request: measured.tokens_per_request,
        measured_sequences_at_context: sequences,
        context_length: input.context_length,
        ratio: measured
            .tokens
            .filter(|_| tokens > 0)
            .map(|m| (m as f64 / tokens as f64 * 100.0).round() / 100.0),
        needed_tokens,
        needed_concurrency,
        findings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::{gpu_by_name, model_by_hf_id, Precision, WorkloadKind};

    fn llama70b(concurrency: u64) -> SizingInput {
        let m = model_by_hf_id("meta-llama/Llama-3.1-70B-Instruct").expect("catalogue row");
        SizingInput::from_catalog(WorkloadKind::RealtimeInference, Precision::Bf16, m, 8192, concurrency)
    }

    #[test]
    fn a_predicted_cache_short_of_the_briefs_concurrency_is_said_as_under_sized() {
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let none = KvMeasured {
            tokens: None,
            max_concurrency: None,
            tokens_per_request: None,
            gpu_memory_utilization: None,
        };
        let crowded = kv_check(&llama70b(1000), h100, 4, &none).unwrap();
        assert!(crowded.predicted_max_concurrency < 1000.0);
        let warning = crowded.room_warning().expect("a warning");
        assert!(
            warning.contains(&format!(
                "has room for {:.1} of the 1,000 requests of 8,192 tokens the brief runs at once (predicted)",
                crowded.predicted_max_concurrency
            )),
            "{warning}"
        );
        let roomy = kv_check(&llama70b(1), h100, 4, &none).unwrap();
        assert_eq!(roomy.room_warning(), None);
    }

    #[test]
    fn a_measured_capacity_below_the_need_is_a_finding_and_the_ratio_compares_with_the_prediction() {
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let input = llama70b(64);
        let predicted = kv_capacity(&input, h100, 4, 0.9).unwrap();
        let measured = KvMeasured {
            tokens: Some(predicted.tokens / 2),
            max_concurrency: Some(20.5),
            tokens_per_request: Some(8192),
            gpu_memory_utilization: None,
        };
        let check = kv_check(&input, h100, 4, &measured).unwrap();
        assert_eq!(check.predicted_tokens, predicted.tokens);
        assert_eq!(check.ratio, Some(0.5));
        assert_eq!(check.needed_tokens, 64 * 8192);
        assert!(check.short());
        let held = (predicted.tokens / 2) as f64 / 8192.0;
        assert!(
            check.findings[0].contains(&format!("{held:.2} sequences of the brief's 8,192 tokens")),
            "{:?}",
            check.findings
        );
        assert!(check.findings[0].contains("needs 64"));
    }

    #[test]
    fn enough_capacity_has_no_finding_and_the_logged_utilisation_drives_the_prediction() {
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let input = llama70b(4);
        let measured = KvMeasured {
            tokens: Some(900_000),
            max_concurrency: Some(109.8),
            tokens_per_request: Some(8192),
            gpu_memory_utilization: Some(0.95),
        };
        let check = kv_check(&input, h100, 4, &measured).unwrap();
        assert!(!check.short(), "{:?}", check.findings);
        assert_eq!(check.gpu_memory_utilization, 0.95);
        assert_eq!(
            check.predicted_tokens,
            kv_capacity(&input, h100, 4, 0.95).unwrap().tokens
        );
    }

    #[test]
    fn a_shorter_max_model_len_and_a_token_count_alone_are_findings() {
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let input = llama70b(16);
        let measured = KvMeasured {
            tokens: Some(100_000),
            max_concurrency: None,
            tokens_per_request: Some(4096),
            gpu_memory_utilization: None,
        };
        let check = kv_check(&input, h100, 4, &measured).unwrap();
        assert_eq!(check.findings.len(), 2, "{:?}", check.findings);
        assert!(check.findings[0].contains("at most 4,096 tokens"));
        // 100,000 ÷ 8,192 = 12.21 sequences of the brief's context, for 16 needed.
        assert!(
            check.findings[1].contains("holds 100,000 tokens: 12.21 sequences of the brief's 8,192 tokens"),
            "{:?}",
            check.findings
        );
        assert!(check.findings[1].contains("needs 16 at once (131,072 tokens)"));
    }

    #[test]
    fn vllms_concurrency_at_its_own_longer_length_raises_no_alarm_at_the_briefs_context() {
        // The server was started for 32,768-token requests and logged 1.9× concurrency there; at the
        // brief's 8,192 tokens its 62,000-token cache holds 7.57 sequences, more than the 4 needed.
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let measured = KvMeasured {
            tokens: Some(62_000),
            max_concurrency: Some(1.89),
            tokens_per_request: Some(32_768),
            gpu_memory_utilization: None,
        };
        let check = kv_check(&llama70b(4), h100, 4, &measured).unwrap();
        assert!(!check.short(), "{:?}", check.findings);
        assert_eq!(check.measured_sequences_at_context, Some(62_000.0 / 8192.0));
        assert!(check.vllm_concurrency_text().contains("32,768 tokens"));
    }

    #[test]
    fn nothing_measured_is_a_prediction_without_findings() {
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let check = kv_check(&llama70b(8), h100, 4, &KvMeasured::default()).unwrap();
        assert!(check.measured_tokens.is_none() && check.ratio.is_none() && !check.short());
        assert!(check.predicted_tokens > 0);
    }

    #[test]
    fn a_hybrid_models_cache_is_judged_by_its_concurrency() {
        // Qwen3.5 under vLLM 0.19 (vllm-project/vllm#40691): 290,864 tokens logged, 33.04 × 32,768
        // by its concurrency; 16 requests of 32,768 tokens fit in the second, not the first.
        let logged = KvMeasured {
            tokens: Some(290_864),
            max_concurrency: Some(33.04),
            tokens_per_request: Some(32_768),
            gpu_memory_utilization: None,
        };
        assert_eq!(logged.capacity_tokens(), Some(1_082_654));
        // Agreeing figures (a full-attention model) keep the token line.
        let agree = KvMeasured {
            tokens: Some(23_648),
            max_concurrency: Some(0.82),
            tokens_per_request: Some(29_000),
            ..logged
        };
        assert_eq!(agree.capacity_tokens(), Some(23_648));
        let m = model_by_hf_id("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        let input = SizingInput::from_catalog(WorkloadKind::RealtimeInference, Precision::Bf16, m, 32_768, 16);
        let h100 = gpu_by_name("H100 SXM").unwrap();
        let check = kv_check(&input, h100, 8, &logged).unwrap();
        assert!(!check.short(), "{:?}", check.findings);
        assert_eq!(
            check.measured_tokens,
            Some(290_864),
            "the page still shows the line as logged"
        );
    }
}
