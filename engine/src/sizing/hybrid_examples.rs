//! Worked examples for the architectures shipping now, from published configs
//! (`tests/fixtures/model-configs/`, see its PROVENANCE.md): a Gated DeltaNet hybrid (Qwen3.5), a
//! Mamba-2 hybrid (Nemotron-H), non-gated experts, multi-token prediction with and without
//! speculative decoding, fp8 weights with 16-bit and fp8 KV, MXFP4 experts, state heads that
//! bound tensor parallelism, and the KV capacity of a real vLLM start-up log. Every figure is
//! computed by hand in the test from the config's own numbers (GiB = 2^30 B, MiB = 2^20 B).

use serde_json::{Map, Value};

use super::tests::{close, option, MIB, RT};
use super::*;

const GIB: f64 = 1_073_741_824.0;
/// An H100 SXM's memory as its driver reports it.
const H100: f64 = 81_559.0 * MIB;

fn config(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text).unwrap() {
        Value::Object(m) => m,
        _ => unreachable!("fixtures are objects"),
    }
}

fn qwen35() -> Map<String, Value> {
    config(include_str!(
        "../../../tests/fixtures/model-configs/Ornith-1.0-35B-A3B.json"
    ))
}
fn nemotron() -> Map<String, Value> {
    config(include_str!(
        "../../../tests/fixtures/model-configs/NVIDIA-Nemotron-3-Nano-30B-A3B.json"
    ))
}
fn deepseek() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/DeepSeek-V3.json"))
}
fn gpt_oss() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/gpt-oss-120b.json"))
}

/// A brief giving params_b, the workload and the config.json, with its serving settings.
fn brief(cfg: &Map<String, Value>, params_b: f64, p: Precision, ctx: u64, conc: u64) -> SizingInput {
    let fields = ArchitectureFields::default();
    let r = resolve(&ArchitectureRequest {
        params_b,
        precision: p,
        num_layers: None,
        num_kv_heads: None,
        head_dim: None,
        fields: &fields,
        model_config: Some(cfg),
        catalog: None,
    });
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    SizingInput {
        workload_kind: RT,
        precision: p,
        params_b,
        context_length: ctx,
        concurrency: conc,
        architecture: r.architecture,
        architecture_notes: r.notes,
        kv_cache_dtype: KvCacheDtype::Auto,
        speculative_decoding: false,
    }
}

#[track_caller]
fn within_2_pct(actual: f64, hand: f64) {
    assert!(
        (actual / hand - 1.0).abs() <= 0.02,
        "engine {actual} is not within 2 % of the hand figure {hand}"
    );
}

#[test]
fn gated_deltanet_state_is_constant_while_attention_kv_grows() {
    let cfg = qwen35();
    // text_config: 40 layers, layer_types 3 linear_attention : 1 full_attention → 30 Gated
    // DeltaNet layers, 10 attention layers with 2 KV heads × 256.
    // State per layer and sequence: recurrent 32 value heads × 128 × 128 in float32
    // (mamba_ssm_dtype) = 2,097,152 B; conv (4 − 1) × (2 × 16 × 128 + 32 × 128) × 2 B = 49,152 B.
    let state_seq = 30.0 * (32.0 * 128.0 * 128.0 * 4.0 + 3.0 * (2.0 * 16.0 * 128.0 + 32.0 * 128.0) * 2.0);
    let kv_token = 2.0 * 10.0 * 2.0 * 256.0 * 2.0; // 20,480 B
    let mut states = Vec::new();
    for ctx in [8192_u64, 65536] {
        let i = brief(&cfg, 35.11, Precision::Bf16, ctx, 16);
        let a = &i.architecture;
        assert_eq!((a.attention_layers, a.state.map(|s| s.layers)), (10, Some(30)));
        let s = size(&i);
        // The state does not depend on the context: 16 × 64,389,120 B = 0.96 GiB.
        close(s.state_gib, 16.0 * state_seq / GIB, 0.005);
        assert_eq!(s.state_text(), "0.96 GiB for 16 sequences, independent of context");
        // The attention KV grows with it: 2.5 GiB at 8K, 20 GiB at 64K; the KV total adds the
        // state (2.5 + 0.96 = 3.46 GiB at 8K).
        let attention = 16.0 * kv_token * ctx as f64 / GIB;
        close(s.attention_kv_gib(), attention, 0.01);
        close(s.kv_cache_gib, attention + 16.0 * state_seq / GIB, 0.005);
        assert_eq!(s.kv_bytes_per_token, 20_480);
        close(s.total_gib, s.weights_gib + s.kv_cache_gib + s.overhead_gib, 0.02);
        // Every layer read as full attention would cache 4× the attention KV and no state.
        let full_attention = 16.0 * 2.0 * 40.0 * 2.0 * 256.0 * 2.0 * ctx as f64 / GIB;
        assert!(full_attention / s.attention_kv_gib() > 3.9);
        let notes = s.architecture_notes.join("\n");
        assert!(
            notes.contains("30 of 40 layers are Gated DeltaNet (linear attention) layers")
                && notes.contains("only the 10 attention layers grow with tokens"),
            "{notes}"
        );
        super::tests::fitting_options_load(&i, &s);
        states.push(s.state_gib);
    }
    assert_eq!(states[0], states[1]);
}

#[test]
fn a_hybrids_kv_total_is_its_attention_kv_plus_its_state() {
    // The contract's example (sizing.md, "KV total = attention layers' KV + state layers × state ×
    // concurrency"): Nemotron-3-Nano-30B-A3B at 32,768 tokens and 16 sequences.
    // Attention: 6 layers × 2 KV heads × 128 × 2 (K and V) × 2 B = 6,144 B per token;
    // 16 × 32,768 × 6,144 B = 3,221,225,472 B = 3.00 GiB.
    // State: 23 Mamba-2 layers × (64 × 64 × 128 × 4 B + 3 × (64 × 64 + 2 × 8 × 128) × 2 B)
    // = 23 × 2,134,016 B = 49,082,368 B per sequence; × 16 = 785,317,888 B = 0.73 GiB.
    // KV total: 3.00 + 0.73 = 3.73 GiB (was 3.00: the attention layers only).
    let i = brief(&nemotron(), 31.6, Precision::Bf16, 32768, 16);
    let s = size(&i);
    assert_eq!(s.kv_cache_gib, 3.73);
    assert_eq!(s.state_gib, 0.73);
    assert_eq!(s.attention_kv_gib(), 3.0);
    assert_eq!(s.state_text(), "0.73 GiB for 16 sequences, independent of context");
}

#[test]
fn mamba2_hybrid_state_is_constant_and_its_relu2_experts_have_two_matrices() {
    let cfg = nemotron();
    // hybrid_override_pattern: 23 × M (Mamba-2), 6 × * (attention), 23 × E (experts).
    // Mamba-2 state per layer and sequence: SSM 64 heads × 64 × 128 in float32
    // (mamba_ssm_cache_dtype) = 2,097,152 B; conv 3 × (64 × 64 + 2 × 8 × 128) × 2 B = 36,864 B.
    let state_seq = 23.0 * (64.0 * 64.0 * 128.0 * 4.0 + 3.0 * (64.0 * 64.0 + 2.0 * 8.0 * 128.0) * 2.0);
    let kv_token = 2.0 * 6.0 * 2.0 * 128.0 * 2.0; // 6,144 B
    for ctx in [16384_u64, 131072] {
        let i = brief(&cfg, 31.6, Precision::Bf16, ctx, 32);
        let s = size(&i);
        close(s.state_gib, 32.0 * state_seq / GIB, 0.005); // 1.46 GiB at any context
                                                           // The KV total: attention KV (6 GiB, then 48 GiB) plus the state.
        close(
            s.kv_cache_gib,
            32.0 * kv_token * ctx as f64 / GIB + 32.0 * state_seq / GIB,
            0.005,
        );
        close(s.attention_kv_gib(), 32.0 * kv_token * ctx as f64 / GIB, 0.01);
        super::tests::fitting_options_load(&i, &s);
    }
    // The experts: 128 per layer on the 23 `E` layers only, two matrices each (relu2 is not
    // gated): 23 × 128 × 2 × 2688 × 1856 = 29.37B — not 52 layers × 3 matrices (99.6B, more than
    // the model).
    let i = brief(&cfg, 31.6, Precision::Bf16, 16384, 32);
    let experts = i.architecture.moe.unwrap().expert_params.unwrap();
    close(experts, 23.0 * 128.0 * 2.0 * 2688.0 * 1856.0, 1.0);
    let notes = i.architecture_notes.join("\n");
    assert!(!notes.contains("too small") && !notes.contains("disagrees"), "{notes}");
    assert!(
        notes.contains("on 23 layers (29.37B expert parameters, 2 matrices each)"),
        "{notes}"
    );
    // With the whole model counted from its shapes (31.58B), the card's 31.6B is right.
    assert_eq!(i.architecture.config_params, None);
    // On one H100: 63.2 GB of weights, 3.22 GB of KV, 1.57 GB of state and the 4.28 GB reserve
    // fit in 76.97 GB; sized as full attention the KV would have been 27.9 GB and it would not.
    let weights = 31.6e9 * 2.0;
    let need = weights + 32.0 * (kv_token * 16384.0 + state_seq) + 0.05 * H100;
    assert!(need <= 0.9 * H100);
    assert!(weights + 32.0 * 53_248.0 * 16384.0 + 0.05 * H100 > 0.9 * H100);
    let s = size(&i);
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.fits), (1, true));
    close(h100.headroom_pct, (0.9 * H100 - need) / (0.9 * H100) * 100.0, 0.01);
}

#[test]
fn a_tensor_parallel_degree_the_state_heads_cannot_split_is_refused() {
    let i = brief(&nemotron(), 31.6, Precision::Bf16, 16384, 32);
    let a = &i.architecture;
    let attention_only = parallelism::Heads::attention(a.num_attention_heads, a.num_kv_heads);
    let hybrid = parallelism::Heads {
        state: a.state,
        ..attention_only
    };
    // 32 attention heads over 2 KV heads split 16 ways (each KV head replicated 8 times) …
    assert!(parallelism::tp_valid(16, Some(32), 2));
    assert_eq!(parallelism::valid_degrees(&attention_only, 16), [1, 2, 4, 8, 16]);
    // … but the Mamba-2 layers' 8 groups cannot: TP 16 is refused for the hybrid.
    assert!(!parallelism::tp_valid_for(16, &hybrid));
    assert_eq!(parallelism::valid_degrees(&hybrid, 16), [1, 2, 4, 8]);
    // A node of 16 devices would run it as TP 8 × PP 2.
    assert_eq!(
        parallelism::layout(16, 16, &hybrid, a.num_layers),
        Some(parallelism::Layout { tp: 8, pp: 2 })
    );
    // Gated DeltaNet: TP must divide 16 key and 32 value heads.
    let q = brief(&qwen35(), 35.11, Precision::Bf16, 8192, 4);
    let s = q.architecture.state.unwrap();
    assert!(s.tp_valid(16) && !s.tp_valid(32));
    assert!(s
        .heads_text()
        .contains("16 linear-attention key heads and 32 value heads"));
}

#[test]
fn mtp_layers_are_weights_always_and_kv_only_with_speculative_decoding() {
    let cfg = deepseek();
    let without = brief(&cfg, 671.0, Precision::Fp8, 32768, 8);
    let with = SizingInput {
        speculative_decoding: true,
        ..without.clone()
    };
    let (a, b) = (size(&without), size(&with));
    // num_nextn_predict_layers 1: one more MLA layer, 576 elements × 2 B per token, when it runs.
    assert_eq!(a.kv_bytes_per_token, 576 * 61 * 2);
    assert_eq!(b.kv_bytes_per_token, 576 * 62 * 2);
    close(b.kv_cache_gib / a.kv_cache_gib, 62.0 / 61.0, 0.001);
    // Its 11.61B parameters are in the weights either way (fp8: 1 B each).
    assert_eq!(a.weights_gib, b.weights_gib);
    within_2_pct(without.architecture.mtp_params, 11.61e9);
    assert!(a
        .architecture_notes
        .iter()
        .any(|n| n.contains("KV cache counts only with speculative_decoding")));
    assert!(b.architecture_notes.iter().any(|n| n.contains("62 KV layers")));
    // The Qwen3.5 hybrid's MTP layer is a full-attention layer: 11 KV layers with it.
    let q = brief(&qwen35(), 35.11, Precision::Bf16, 8192, 4);
    assert_eq!(q.architecture.mtp_layers, 1);
    let spec = size(&SizingInput {
        speculative_decoding: true,
        ..q.clone()
    });
    assert_eq!(spec.kv_bytes_per_token, 2 * 11 * 2 * 256 * 2);
    assert_eq!(size(&q).kv_bytes_per_token, 2 * 10 * 2 * 256 * 2);
}

#[test]
fn fp8_weights_keep_16_bit_kv_unless_the_brief_asks_for_fp8_kv() {
    let cfg = deepseek();
    let auto = brief(&cfg, 671.0, Precision::Fp8, 32768, 8);
    let fp8 = SizingInput {
        kv_cache_dtype: KvCacheDtype::Fp8,
        ..auto.clone()
    };
    let (a, f) = (size(&auto), size(&fp8));
    // auto: the latent stays 16-bit whatever the weights (vLLM kv_cache_dtype=auto): 70,272 B
    // per token; fp8 halves it to 35,136 B. The weights do not change.
    assert_eq!(a.kv_bytes_per_token, 70_272);
    assert_eq!(f.kv_bytes_per_token, 35_136);
    close(a.kv_cache_gib, 70_272.0 * 32768.0 * 8.0 / GIB, 0.005);
    close(f.kv_cache_gib, a.kv_cache_gib / 2.0, 0.005);
    assert_eq!(a.weights_gib, f.weights_gib);
    assert!(a
        .architecture_notes
        .iter()
        .any(|n| n.contains("stays 16-bit although the weights are fp8")));
    assert!(f.architecture_notes.iter().any(|n| n.contains("kv_cache_dtype fp8")));
    // A hybrid's state keeps its own dtype under fp8 KV: only the attention layers halve.
    let q = brief(&qwen35(), 35.11, Precision::Fp8, 8192, 16);
    let (qa, qf) = (
        size(&q),
        size(&SizingInput {
            kv_cache_dtype: KvCacheDtype::Fp8,
            ..q.clone()
        }),
    );
    assert_eq!(qa.state_gib, qf.state_gib);
    close(qf.attention_kv_gib(), qa.attention_kv_gib() / 2.0, 0.01);
    // The KV total halves its attention part only: fp8 total = half the attention KV + the state.
    close(qf.kv_cache_gib, qa.attention_kv_gib() / 2.0 + qa.state_gib, 0.01);
}

#[test]
fn mxfp4_checkpoint_keeps_its_experts_at_4_25_bits() {
    let i = brief(&gpt_oss(), 116.83, Precision::Bf16, 32768, 4);
    assert!(i.architecture.mxfp4_experts);
    let s = size(&i);
    // Experts from the shapes: 36 layers × 128 × 3 × 2880 × 2880 at 4.25 bits (OCP MXFP4);
    // embeddings 2 × 201088 × 2880 and everything else in bf16.
    let experts = 36.0 * 128.0 * 3.0 * 2880.0 * 2880.0;
    let hand = experts * 4.25 / 8.0 + (116.83e9 - experts) * 2.0;
    within_2_pct(s.weights_gib, hand / GIB);
    // The KV cache stays 16-bit (no fp8 KV implied by a quantised checkpoint).
    let per_seq = 2.0 * 8.0 * 64.0 * 2.0 * (18.0 * 32768.0 + 18.0 * 128.0);
    close(s.kv_cache_gib, 4.0 * per_seq / GIB, 0.005);
}

/// vLLM 0.10.1 serving gpt-oss-120b with TP 4 on four A100 80GB at `gpu_memory_utilization`
/// 0.8 logged `GPU KV cache size: 2,640,144 tokens` (tests/fixtures/vllm-log, real).
#[test]
fn the_kv_capacity_of_a_real_vllm_log_is_predicted_within_3_percent() {
    let log = include_str!("../../../tests/fixtures/vllm-log/v0.10.1-gpt-oss-120b-tp4-4x-a100-80gb-gmu0.8.log");
    let logged: u64 = log
        .lines()
        .find_map(|l| l.split("GPU KV cache size: ").nth(1))
        .and_then(|rest| rest.split(" tokens").next())
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap();
    assert_eq!(logged, 2_640_144);
    assert!(log.contains("'gpu_memory_utilization': 0.8") && log.contains("tensor_parallel_size=4"));
    let model = model_by_hf_id("openai/gpt-oss-120b").unwrap();
    let input = SizingInput::from_catalog(RT, Precision::Bf16, model, 16384, 1);
    let a100 = gpu_by_name("A100 80GB SXM").unwrap();
    let predicted = kv_capacity(&input, a100, 4, 0.8).unwrap();
    // By hand: each A100 reports 81,920 MiB; 0.8 of it is 68.72 GB, less a quarter of the
    // 65.19 GB of weights (MXFP4 experts) and the 5 % reserve (4.29 GB): 48.13 GB. TP 4 splits
    // the 8 KV heads, so a token of every layer (36 × 2 KV heads × 64 × 2 × 2 B = 18,432 B per
    // GPU; vLLM counts a token in every layer, windows or not) takes 18,432 B of it.
    let memory = 81_920.0 * MIB;
    let weights = 114.702e9 * 4.25 / 8.0 + (116.83e9 - 114.702e9) * 2.0;
    let per_gpu = 0.8 * memory - weights / 4.0 - 0.05 * memory;
    let hand = (per_gpu / 18_432.0).floor() as u64;
    assert!(
        (predicted.tokens as f64 / hand as f64 - 1.0).abs() < 0.002,
        "{predicted:?} vs {hand}"
    );
    let ratio = logged as f64 / predicted.tokens as f64;
    assert!(
        (ratio - 1.0).abs() <= 0.03,
        "logged {logged}, predicted {}",
        predicted.tokens
    );
    // With the datasheet's 80e9 bytes it was 8 % short.
    let datasheet = (0.8 * 80e9 - weights / 4.0 - 0.05 * 80e9) / 18_432.0;
    assert!(logged as f64 / datasheet > 1.07);
}

#[test]
fn a_hybrid_catalogue_row_sizes_as_its_config() {
    for (cfg, hf, params) in [
        (qwen35(), "Qwen/Qwen3.5-35B-A3B", 35.11),
        (nemotron(), "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.58),
    ] {
        let from_config = size(&brief(&cfg, params, Precision::Bf16, 32768, 8));
        let row = model_by_hf_id(hf).unwrap();
        let from_row = size(&SizingInput::from_catalog(RT, Precision::Bf16, row, 32768, 8));
        assert_eq!(from_config.kv_bytes_per_token, from_row.kv_bytes_per_token, "{hf}");
        assert_eq!(
            (from_config.kv_cache_gib, from_config.state_gib),
            (from_row.kv_cache_gib, from_row.state_gib),
            "{hf}"
        );
        within_2_pct(from_config.weights_gib, from_row.weights_gib);
    }
}
