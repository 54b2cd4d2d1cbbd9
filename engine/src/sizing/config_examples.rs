//! Worked examples from published config.json files (`tests/fixtures/model-configs/`, see its
//! PROVENANCE.md), one per architecture class, each at a context longer than its window. The
//! hand figure is computed in the test from the config's own numbers; the engine must land
//! within 2 % of it. GB = 1e9 B, GiB = 2^30 B; fit per GPU: weights/count + KV per GPU +
//! max(1.5 GB, 5 % of memory) ≤ 0.9 × memory.

use serde_json::{Map, Value};

use super::model_config::{self, LayerWindow};
use super::tests::{close, option, RT};
use super::*;

const GIB: f64 = 1_073_741_824.0;
const MIB: f64 = 1_048_576.0;
/// Driver-reported memory (`nvidia-smi` `memory.total`) of the GPUs these examples use.
const H100: f64 = 81_559.0 * MIB;
const H200: f64 = 143_771.0 * MIB;
const L4: f64 = 23_034.0 * MIB;

fn config(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text).unwrap() {
        Value::Object(m) => m,
        _ => unreachable!("fixtures are objects"),
    }
}

fn gemma3() -> Map<String, Value> {
    config(include_str!(
        "../../../tests/fixtures/model-configs/gemma-3-27b-it.json"
    ))
}
fn scout() -> Map<String, Value> {
    config(include_str!(
        "../../../tests/fixtures/model-configs/Llama-4-Scout-17B-16E-Instruct.json"
    ))
}
fn deepseek() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/DeepSeek-V3.json"))
}
fn qwen3_moe() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/Qwen3-30B-A3B.json"))
}
fn llama8b() -> Map<String, Value> {
    config(include_str!(
        "../../../tests/fixtures/model-configs/Llama-3.1-8B-Instruct.json"
    ))
}
fn phi4() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/phi-4.json"))
}
fn gpt_oss() -> Map<String, Value> {
    config(include_str!("../../../tests/fixtures/model-configs/gpt-oss-120b.json"))
}

/// A brief that gives only params_b, the workload and the config.json.
fn from_config(cfg: &Map<String, Value>, params_b: f64, p: Precision, ctx: u64, conc: u64) -> SizingInput {
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

#[track_caller]
fn every_fitting_option_loads(input: &SizingInput, s: &Sizing) {
    assert!(super::tests::fitting_options_load(input, s) > 0);
}

#[test]
fn gemma3_interleaved_window_from_config() {
    let cfg = gemma3();
    let i = from_config(&cfg, 27.43, Precision::Bf16, 32768, 4);
    let s = size(&i);
    // text_config: 62 layers, 16 KV heads × head_dim 128; no pattern given, so Gemma 3's
    // default: every 6th layer global → 10 global, 52 local keeping 1024 tokens.
    let per_layer_token = 2.0 * 16.0 * 128.0 * 2.0; // K and V, bf16: 8192 B
    let global = (62 / 6) as f64;
    let local = 62.0 - global;
    let per_seq = per_layer_token * (global * 32768.0 + local * 1024.0);
    within_2_pct(s.kv_cache_gib, 4.0 * per_seq / GIB);
    within_2_pct(s.kv_bytes_per_token as f64, per_seq / 32768.0);
    // The plain formula (every layer keeps every token) is 5.3× too much.
    let plain = 4.0 * per_layer_token * 62.0 * 32768.0 / GIB;
    assert!(plain / s.kv_cache_gib > 5.0, "{plain} vs {}", s.kv_cache_gib);
    // So it fits one H100: 54.86 GB weights + 12.48 GB KV + 4.28 GB reserve = 71.62 ≤ 76.97 GB.
    let weights = 27.43e9 * 2.0;
    let need = weights + 4.0 * per_seq + 0.05 * H100;
    assert!(need <= 0.9 * H100);
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.fits, h100.tensor_parallel), (1, true, 1));
    close(h100.headroom_pct, (0.9 * H100 - need) / (0.9 * H100) * 100.0, 0.01);
    // What was read, and the defaults used, are in the notes.
    let notes = s.architecture_notes.join("\n");
    assert!(notes.contains("62 layers"), "{notes}");
    assert!(notes.contains("sliding_window_pattern 6"), "{notes}");
    assert!(
        notes.contains("52 of 62 attention layers keep only 1024 tokens (a sliding window)"),
        "{notes}"
    );
    every_fitting_option_loads(&i, &s);
}

#[test]
fn llama4_scout_chunked_attention_from_config() {
    let cfg = scout();
    let i = from_config(&cfg, 108.64, Precision::Bf16, 131072, 2);
    let s = size(&i);
    // 48 layers, 8 KV heads × 128; no_rope_layers absent → every 4th layer global (12), the
    // other 36 attend within 8192-token chunks.
    let per_layer_token = 2.0 * 8.0 * 128.0 * 2.0;
    let per_seq = per_layer_token * (12.0 * 131072.0 + 36.0 * 8192.0);
    within_2_pct(s.kv_cache_gib, 2.0 * per_seq / GIB);
    let plain = 2.0 * per_layer_token * 48.0 * 131072.0 / GIB;
    assert!(plain / s.kv_cache_gib > 3.3, "{plain} vs {}", s.kv_cache_gib);
    // H100: × 2 needs 108.64 + 7.65 + 4.28 GB > 76.97; × 4 (TP 4: 40 and 8 heads split 4 ways)
    // needs 54.32 + 3.83 + 4.28 = 62.43 GB.
    let h100 = option(&s, "H100 SXM");
    assert_eq!((h100.count, h100.tensor_parallel, h100.pipeline_parallel), (4, 4, 1));
    // 16 experts of 3 × 5120 × 8192 on 48 layers = 96.64B parameters in experts.
    let moe = i.architecture.moe.unwrap();
    within_2_pct(moe.expert_params.unwrap(), 48.0 * 16.0 * 3.0 * 5120.0 * 8192.0);
    assert_eq!((moe.num_experts, moe.experts_per_token), (16, 1));
    every_fitting_option_loads(&i, &s);
}

#[test]
fn deepseek_v3_latent_attention_from_config() {
    let cfg = deepseek();
    let i = from_config(&cfg, 671.0, Precision::Fp8, 32768, 8);
    let s = size(&i);
    // MLA: kv_lora_rank 512 + qk_rope_head_dim 64 elements per layer and token, 61 layers, bf16.
    let per_token = (512.0 + 64.0) * 61.0 * 2.0;
    within_2_pct(s.kv_cache_gib, 8.0 * 32768.0 * per_token / GIB);
    assert_eq!(s.kv_bytes_per_token, 70_272);
    // Expanded to 128 heads × (K 192 + V 192) it would be 85× more.
    let expanded = 2.0 * 61.0 * 128.0 * 192.0 * 2.0;
    assert!(expanded / per_token > 80.0);
    // fp8 weights with 16-bit embedding and lm_head: experts from the shapes
    // 58 × 256 × 3 × 7168 × 2048, embeddings 2 × 129280 × 7168; and the multi-token-prediction
    // layer (num_nextn_predict_layers 1) that ships in the checkpoint: one more MLA layer with its
    // 256 experts, shared expert and router, and the 2 × 7168 × 7168 projection.
    let experts = 58.0 * 256.0 * 3.0 * 7168.0 * 2048.0;
    let embed = 2.0 * 129280.0 * 7168.0;
    let mla =
        7168.0 * 1536.0 + 1536.0 * 128.0 * 192.0 + 7168.0 * 576.0 + 512.0 * 128.0 * 256.0 + 128.0 * 128.0 * 7168.0;
    let mtp = mla + 257.0 * 3.0 * 7168.0 * 2048.0 + 256.0 * 7168.0 + 2.0 * 7168.0 * 7168.0;
    let weights = experts + embed * 2.0 + (671e9 - experts - embed) + mtp;
    within_2_pct(s.weights_gib, weights / GIB);
    assert_eq!(i.architecture.mtp_layers, 1);
    within_2_pct(i.architecture.mtp_params, mtp);
    let notes = s.architecture_notes.join("\n");
    assert!(
        notes.contains("1 multi-token-prediction layer(s) add 11.61B parameters to the weights"),
        "{notes}"
    );
    every_fitting_option_loads(&i, &s);
}

#[test]
fn deepseek_v3_prefers_one_node_with_data_parallel_attention() {
    let cfg = deepseek();
    let i = from_config(&cfg, 671.0, Precision::Fp8, 32768, 48);
    let s = size(&i);
    let experts = 58.0 * 256.0 * 3.0 * 7168.0 * 2048.0;
    let embed = 2.0 * 129280.0 * 7168.0;
    // 16-bit embeddings, fp8 rest, and the multi-token-prediction layer's 11.61B (counted with the
    // shared weights: every GPU keeps it).
    let shared = embed * 2.0 + (671e9 - experts - embed) + i.architecture.mtp_params;
    let per_seq = (512.0 + 64.0) * 61.0 * 2.0 * 32768.0;
    let reserve = 0.05 * H200;
    let usable = 0.9 * H200;
    // H200 × 8 with tensor parallel: every GPU holds all 48 sequences' latent — far too much.
    let tp8 = (shared + experts) / 8.0 + 48.0 * per_seq + reserve;
    assert!(tp8 > usable);
    // Data-parallel attention: shared weights everywhere, 1/8 of the experts, 6 sequences each.
    let dp8 = shared + experts / 8.0 + 6.0 * per_seq + reserve;
    assert!(dp8 <= usable, "{dp8}");
    let h200 = option(&s, "H200 SXM");
    assert_eq!((h200.count, h200.fits, h200.tensor_parallel), (8, true, 1));
    close(h200.headroom_pct, (usable - dp8) / usable * 100.0, 0.01);
    let note = h200.load_note.as_deref().unwrap();
    assert!(
        note.contains("data-parallel attention") && note.contains("--data-parallel-size 8"),
        "{note}"
    );
    // Without the setting it would take two nodes (TP 8 × PP 2).
    let plain = options::option_for(
        &memory::Footprint {
            dp_attention: None,
            ..memory::footprint(&i)
        },
        gpu_by_name("H200 SXM").unwrap(),
    );
    assert_eq!(
        (plain.count, plain.tensor_parallel, plain.pipeline_parallel),
        (16, 8, 2)
    );
}

#[test]
fn qwen3_moe_from_config_reads_only_the_active_experts() {
    let cfg = qwen3_moe();
    let i = from_config(&cfg, 30.53, Precision::Bf16, 32768, 1);
    let s = size(&i);
    // 48 layers × 4 KV heads × 128, bf16; sliding_window null and use_sliding_window false.
    let per_seq = 2.0 * 48.0 * 4.0 * 128.0 * 2.0 * 32768.0;
    within_2_pct(s.kv_cache_gib, per_seq / GIB);
    within_2_pct(s.weights_gib, 30.53e9 * 2.0 / GIB);
    // Experts 48 × 128 × 3 × 2048 × 768 = 28.99B; at one sequence a step reads the shared
    // weights and 8/128 of the experts.
    let experts = 48.0 * 128.0 * 3.0 * 2048.0 * 768.0;
    let read = (30.53e9 - experts) * 2.0 + experts * 2.0 * 8.0 / 128.0 + per_seq;
    let h100 = option(&s, "H100 SXM");
    assert_eq!(h100.count, 1);
    within_2_pct(h100.decode_tokens_per_s_max, 3350e9 / read);
    // Reading every weight (the dense formula) would be 6× slower.
    assert!(h100.decode_tokens_per_s_max > 5.0 * 3350e9 / (30.53e9 * 2.0 + per_seq));
    every_fitting_option_loads(&i, &s);
}

#[test]
fn llama31_8b_plain_gqa_from_config_matches_the_catalogue() {
    let cfg = llama8b();
    let i = from_config(&cfg, 8.03, Precision::Bf16, 131072, 4);
    let s = size(&i);
    // 2 × 32 layers × 8 KV heads × 128 × 2 B = 131,072 B per token; × 131072 × 4 = 64 GiB.
    let hand = 2.0 * 32.0 * 8.0 * 128.0 * 2.0 * 131072.0 * 4.0 / GIB;
    within_2_pct(s.kv_cache_gib, hand);
    assert_eq!(s.kv_bytes_per_token, 131_072);
    let catalogue = size(&super::tests::input(
        RT,
        Precision::Bf16,
        "meta-llama/Llama-3.1-8B-Instruct",
        131072,
        4,
    ));
    assert_eq!(s.options, catalogue.options);
    assert_eq!(
        (s.weights_gib, s.kv_cache_gib),
        (catalogue.weights_gib, catalogue.kv_cache_gib)
    );
    every_fitting_option_loads(&i, &s);
}

#[test]
fn gpt_oss_layer_types_and_mxfp4_experts_from_config() {
    let cfg = gpt_oss();
    let i = from_config(&cfg, 116.83, Precision::Bf16, 32768, 4);
    assert_eq!(
        i.architecture.sliding,
        Some(LayerWindow {
            tokens: 128,
            layers: 18
        })
    );
    assert!(i.architecture.mxfp4_experts);
    let s = size(&i);
    // 18 full layers × 32768 + 18 windowed × 128 tokens, 2 × 8 × 64 × 2 B each, 4 sequences.
    let hand = 2.0 * 8.0 * 64.0 * 2.0 * (18.0 * 32768.0 + 18.0 * 128.0) * 4.0 / GIB;
    within_2_pct(s.kv_cache_gib, hand);
    // The same as the catalogue row (which cites this config).
    let catalogue = size(&super::tests::input(
        RT,
        Precision::Bf16,
        "openai/gpt-oss-120b",
        32768,
        4,
    ));
    within_2_pct(s.weights_gib, catalogue.weights_gib);
}

#[test]
fn phi4_tensor_parallel_follows_ten_kv_heads() {
    let cfg = phi4();
    let i = from_config(&cfg, 14.66, Precision::Bf16, 16384, 8);
    assert_eq!(
        (i.architecture.num_attention_heads, i.architecture.num_kv_heads),
        (Some(40), 10)
    );
    let s = size(&i);
    for o in &s.options {
        let tp = o.tensor_parallel;
        assert!(40 % tp == 0 && (10 % tp == 0 || tp % 10 == 0), "{}: TP {tp}", o.gpu);
    }
    // L4 (23,034 MiB, usable 21.74 GB): KV 2 × 40 × 10 × 128 × 2 B × 16384 × 8 = 26.84 GB,
    // weights 29.32 GB. × 2 (TP 2): 14.66 + 13.42 + 1.5 > 21.74; × 4 cannot be TP 4 (10 KV
    // heads), so TP 2 × PP 2: 7.33 + 26.84 / 4 + 1.5 = 15.54 GB ≤ 21.74.
    let kv = 2.0 * 40.0 * 10.0 * 128.0 * 2.0 * 16384.0 * 8.0;
    let w = 14.66e9 * 2.0;
    let usable = 0.9 * L4;
    assert!(w / 2.0 + kv / 2.0 + 1.5e9 > usable);
    let l4 = option(&s, "L4");
    assert_eq!(
        (l4.count, l4.tensor_parallel, l4.pipeline_parallel, l4.fits),
        (4, 2, 2, true)
    );
    close(
        l4.headroom_pct,
        (usable - (w / 4.0 + kv / 4.0 + 1.5e9)) / usable * 100.0,
        0.01,
    );
    let note = l4.interconnect_note.as_deref().unwrap();
    assert!(note.contains("tensor parallel 2 × pipeline parallel 2"), "{note}");
    assert!(note.contains("10 KV heads allow tensor parallel 1 or 2 only"), "{note}");
    every_fitting_option_loads(&i, &s);
}

#[test]
fn bf16_on_a_gpu_without_bf16_says_fp16() {
    let cfg = llama8b();
    let i = from_config(&cfg, 8.03, Precision::Bf16, 8192, 4);
    let s = size(&i);
    // T4 (no bf16): 16.06 GB weights + 4.29 GB KV; × 2: 8.03 + 2.15 + 1.5 = 11.68 ≤ 14.4 GB.
    let t4 = option(&s, "T4");
    assert!(!t4.fits);
    let note = t4.load_note.as_deref().unwrap();
    assert!(
        note.contains("no bf16") && note.contains("in fp16 it takes 2 × T4"),
        "{note}"
    );
    for name in ["V100 32GB SXM2", "V100 32GB PCIe"] {
        assert!(!option(&s, name).fits, "{name}");
    }
    // The same brief in fp16 loads on the same two T4s.
    let f = size(&SizingInput {
        precision: Precision::Fp16,
        ..i.clone()
    });
    let t4_fp16 = option(&f, "T4");
    assert_eq!(
        (t4_fp16.count, t4_fp16.fits, t4_fp16.load_note.as_deref()),
        (2, true, None)
    );
    every_fitting_option_loads(&i, &s);
}

#[test]
fn fp8_moe_on_ampere_is_refused_with_the_alternative() {
    let cfg = qwen3_moe();
    let i = from_config(&cfg, 30.53, Precision::Fp8, 32768, 8);
    let s = size(&i);
    let a100 = option(&s, "A100 80GB SXM");
    assert!(!a100.fits);
    let note = a100.load_note.as_deref().unwrap();
    assert!(
        note.contains("compute capability 8.9") && note.contains("8.0"),
        "{note}"
    );
    // In bf16: 61.06 GB weights + 8 × 3.22 GB KV; × 1: 61.06 + 25.77 + 4 > 72; × 2 (TP 2):
    // 30.53 + 12.88 + 4 = 47.41 ≤ 72.
    assert!(note.contains("in bf16 it takes 2 × A100 80GB SXM"), "{note}");
    // Hopper and Ada run it natively.
    for name in ["H100 SXM", "L40S"] {
        let o = option(&s, name);
        assert!(o.fits && o.load_note.is_none(), "{name}: {o:?}");
    }
    // A dense fp8 model loads on the A100 weight-only, and says so.
    let dense = size(&from_config(&llama8b(), 8.03, Precision::Fp8, 8192, 4));
    let a100 = option(&dense, "A100 80GB SXM");
    assert!(a100.fits);
    assert!(a100.load_note.as_deref().unwrap().contains("weight-only fp8"));
    every_fitting_option_loads(&i, &s);
}

#[test]
fn config_reader_names_bad_values_by_path() {
    let bad = config(
        r#"{"text_config": {"num_hidden_layers": "62", "num_attention_heads": -4},
            "quantization_config": {"quant_method": 8}, "layer_types": "sliding"}"#,
    );
    let errors = model_config::read(&bad).unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    for p in [
        "model_config.text_config.num_hidden_layers",
        "model_config.text_config.num_attention_heads",
        "model_config.quantization_config.quant_method",
        "model_config.layer_types",
    ] {
        assert!(paths.contains(&p), "{p} missing from {paths:?}");
    }
    assert!(model_config::read(&config(r#"{"text_config": 3}"#)).is_err());
}

#[test]
fn unknown_layouts_are_named_not_guessed() {
    // A window without a rule for which layers use it: full attention on every layer, noted.
    let c = config(
        r#"{"model_type": "somenew", "num_hidden_layers": 40, "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_size": 4096, "sliding_window": 4096}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!(r.sliding, None);
    assert!(r.notes[0].contains("does not say which layers use it"), "{:?}", r.notes);
    // A hybrid state-space model without its state dimensions: its Mamba layers are named and
    // sized as attention (an upper bound), never silently.
    let c = config(
        r#"{"num_hidden_layers": 8, "num_attention_heads": 8, "hidden_size": 1024,
            "hybrid_override_pattern": "M-M*-M-M"}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("4 Mamba-2 layers but not all of their state dimensions")),
        "{:?}",
        r.notes
    );
    assert_eq!((r.attention_layers, r.state), (Some(8), None));
    // Linear-attention dimensions without a rule for which layers use them: named.
    let c = config(
        r#"{"model_type": "somehybrid", "num_hidden_layers": 8, "num_attention_heads": 8,
            "num_key_value_heads": 2, "hidden_size": 1024, "linear_num_value_heads": 16,
            "linear_conv_kernel_dim": 4}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("neither layer_types nor full_attention_interval")),
        "{:?}",
        r.notes
    );
    // A pattern letter the reader does not know: named, every layer at full attention.
    let c = config(
        r#"{"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
            "hidden_size": 1024, "hybrid_override_pattern": "M*XM"}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert!(
        r.notes.iter().any(|n| n.contains("the layer letter 'X'")),
        "{:?}",
        r.notes
    );
    assert_eq!((r.attention_layers, r.state), (None, None));
    // Layers of a kind the reader does not model in layers_block_type (Zamba's shared
    // attention): named.
    let c = config(
        r#"{"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
            "hidden_size": 1024, "layers_block_type": ["mamba", "hybrid"]}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert!(r.notes.iter().any(|n| n.contains("\"hybrid\" layers")), "{:?}", r.notes);
    let c = config(
        r#"{"num_hidden_layers": 8, "num_attention_heads": 8, "hidden_size": 1024,
            "hybrid_override_pattern": "M-M*-M-M"}"#,
    );
    let r = model_config::read(&c).unwrap();
    // No num_key_value_heads: multi-head attention, as transformers assumes, and said.
    assert_eq!(r.num_kv_heads, Some(8));
    assert!(r.notes.iter().any(|n| n.contains("num_key_value_heads")));
    // layer_types that do not match the layers contradict the config.
    let c = config(
        r#"{"num_hidden_layers": 3, "num_attention_heads": 8, "hidden_size": 1024, "sliding_window": 512,
            "layer_types": ["sliding_attention", "full_attention"]}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!(r.sliding, None);
    assert!(
        r.notes.iter().any(|n| n.contains("contradicts itself")),
        "{:?}",
        r.notes
    );
}

#[test]
fn explicit_fields_win_over_config_and_contradictions_are_noted() {
    let cfg = gemma3();
    let fields = ArchitectureFields {
        sliding_window: Some(512),
        ..ArchitectureFields::default()
    };
    let r = resolve(&ArchitectureRequest {
        params_b: 27.43,
        precision: Precision::Bf16,
        num_layers: None,
        num_kv_heads: Some(8),
        head_dim: None,
        fields: &fields,
        model_config: Some(&cfg),
        catalog: model_by_hf_id("google/gemma-3-27b-it"),
    });
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.architecture.num_kv_heads, 8);
    assert_eq!(
        r.architecture.sliding,
        Some(LayerWindow {
            tokens: 512,
            layers: 52
        })
    );
    let notes = r.notes.join("\n");
    assert!(
        notes.contains("num_kv_heads 8 as given; config.json says 16"),
        "{notes}"
    );
    assert!(
        notes.contains("sliding_window 512 as given; config.json says 1024"),
        "{notes}"
    );

    // Explicit fields that contradict each other are problems on the field.
    let bad = ArchitectureFields {
        sliding_window: Some(4096),
        experts_per_token: Some(9),
        num_experts: Some(8),
        layer_types: Some(vec!["sliding_attention".into(), "local".into()]),
        ..ArchitectureFields::default()
    };
    let r = resolve(&ArchitectureRequest {
        params_b: 7.0,
        precision: Precision::Bf16,
        num_layers: Some(32),
        num_kv_heads: Some(8),
        head_dim: Some(128),
        fields: &bad,
        model_config: None,
        catalog: None,
    });
    let fields: Vec<&str> = r.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["layer_types", "sliding_window", "experts_per_token"]);
}

#[test]
fn hybrid_layouts_are_read_from_every_spelling() {
    // Qwen3-Next style: no layer_types, every 4th layer attends (full_attention_interval).
    let c = config(
        r#"{"model_type": "qwen3_next", "num_hidden_layers": 8, "num_attention_heads": 16,
            "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
            "full_attention_interval": 4, "linear_num_value_heads": 32, "linear_num_key_heads": 16,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!(r.attention_layers, Some(2));
    let s = r.state.unwrap();
    assert_eq!((s.kind, s.layers, s.ssm_bytes), (StateKind::Gdn, 6, Some(4.0)));
    // The same without the interval: Qwen3-Next's default of 4 applies, and is said.
    let c = config(
        r#"{"model_type": "qwen3_next", "num_hidden_layers": 8, "num_attention_heads": 16,
            "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
            "linear_num_value_heads": 32, "linear_num_key_heads": 16,
            "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!((r.attention_layers, r.state.map(|s| s.layers)), (Some(2), Some(6)));
    assert!(
        r.notes.iter().any(|n| n.contains("full_attention_interval 4")),
        "{:?}",
        r.notes
    );
    // Granite-H style: layer_types of mamba and attention; Mamba heads from expand × hidden.
    let c = config(
        r#"{"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
            "hidden_size": 1024, "layer_types": ["mamba", "mamba", "attention", "mamba"],
            "mamba_expand": 2, "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 128,
            "mamba_d_conv": 4}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!(r.attention_layers, Some(1));
    let s = r.state.unwrap();
    // 2 × 1024 / 64 = 32 heads; no dtype named: the model's.
    assert_eq!(
        (s.kind, s.layers, s.heads, s.groups, s.ssm_bytes),
        (StateKind::Mamba2, 3, 32, 1, None)
    );
    // One group is kept whole on every rank: the heads bound tensor parallelism.
    assert!(s.tp_valid(8) && !s.tp_valid(64));
    // layers_block_type (Jamba / Zamba spelling).
    let c = config(
        r#"{"num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
            "hidden_size": 1024, "layers_block_type": ["mamba", "attention"],
            "mamba_num_heads": 32, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 64,
            "conv_kernel": 4, "mamba_ssm_cache_dtype": "float32"}"#,
    );
    let r = model_config::read(&c).unwrap();
    assert_eq!(
        (r.attention_layers, r.state.map(|s| (s.layers, s.ssm_bytes))),
        (Some(1), Some((1, Some(4.0))))
    );
}

#[test]
fn a_briefs_own_layer_types_may_name_state_layers_when_their_sizes_are_known() {
    let nemotron = config(include_str!(
        "../../../tests/fixtures/model-configs/NVIDIA-Nemotron-3-Nano-30B-A3B.json"
    ));
    // Without a config the state has no size: refused on the field, not sized as attention.
    let types: Vec<String> = ["mamba", "full_attention"].iter().map(|t| (*t).to_owned()).collect();
    let fields = ArchitectureFields {
        layer_types: Some(types),
        ..ArchitectureFields::default()
    };
    let bare = resolve(&ArchitectureRequest {
        params_b: 1.0,
        precision: Precision::Bf16,
        num_layers: Some(2),
        num_kv_heads: Some(2),
        head_dim: Some(128),
        fields: &fields,
        model_config: None,
        catalog: None,
    });
    assert_eq!(bare.problems.len(), 1, "{:?}", bare.problems);
    assert_eq!(bare.problems[0].field, "layer_types");
    assert!(bare.problems[0].message.contains("give model_config"));
    // With the config: the brief's list decides how many layers keep the state (here 39 Mamba
    // and 13 attention instead of the pattern's 23 and 6), the config sizes each state layer.
    let types: Vec<String> = (0..52)
        .map(|i| if i % 4 == 3 { "full_attention" } else { "mamba" }.to_owned())
        .collect();
    let fields = ArchitectureFields {
        layer_types: Some(types),
        ..ArchitectureFields::default()
    };
    let r = resolve(&ArchitectureRequest {
        params_b: 31.6,
        precision: Precision::Bf16,
        num_layers: None,
        num_kv_heads: None,
        head_dim: None,
        fields: &fields,
        model_config: Some(&nemotron),
        catalog: None,
    });
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.architecture.attention_layers, 13);
    assert_eq!(r.architecture.state.map(|s| s.layers), Some(39));
}

#[test]
fn kv_heads_under_falcon_and_chatglm_names() {
    // tiiuae/falcon-7b's config.json as transformers 4.28 writes it: multi-query attention (one KV
    // head), although `num_kv_heads` repeats the 71 query heads; vLLM reads the flag first.
    let falcon_7b = config(
        r#"{"model_type": "falcon", "hidden_size": 4544, "multi_query": true,
            "new_decoder_architecture": false, "num_attention_heads": 71, "num_hidden_layers": 32,
            "num_kv_heads": 71, "parallel_attn": true, "vocab_size": 65024}"#,
    );
    let r = model_config::read(&falcon_7b).unwrap();
    assert_eq!((r.num_kv_heads, r.head_dim), (Some(1), Some(64)));
    assert!(
        r.notes.iter().all(|n| !n.contains("num_key_value_heads")),
        "{:?}",
        r.notes
    );
    // tiiuae/falcon-40b: the new decoder architecture, eight KV heads named `num_kv_heads`.
    let falcon_40b = config(
        r#"{"model_type": "falcon", "hidden_size": 8192, "new_decoder_architecture": true,
            "num_attention_heads": 128, "num_hidden_layers": 60, "num_kv_heads": 8,
            "parallel_attn": true, "vocab_size": 65024}"#,
    );
    assert_eq!(model_config::read(&falcon_40b).unwrap().num_kv_heads, Some(8));
    // The older RefinedWeb configs: `n_head_kv`.
    let refined_web =
        config(r#"{"num_attention_heads": 128, "num_hidden_layers": 60, "hidden_size": 8192, "n_head_kv": 8}"#);
    assert_eq!(model_config::read(&refined_web).unwrap().num_kv_heads, Some(8));
    // ChatGLM's groups.
    let chatglm = config(
        r#"{"num_attention_heads": 32, "num_hidden_layers": 28, "hidden_size": 4096,
            "multi_query_attention": true, "multi_query_group_num": 2}"#,
    );
    assert_eq!(model_config::read(&chatglm).unwrap().num_kv_heads, Some(2));
    // Falcon-7B at 2,048 tokens × 32 in bf16: 2 × 32 layers × 1 head × 64 × 2 B = 8,192 B a
    // token, 0.5 GiB in all (it was 71 heads: 35.5 GiB).
    let s = size(&from_config(&falcon_7b, 7.0, Precision::Bf16, 2_048, 32));
    within_2_pct(s.kv_cache_gib * GIB, 8_192.0 * 2_048.0 * 32.0);
}

#[test]
fn a_context_past_the_published_maximum_is_named() {
    let past = |s: &Sizing| {
        s.architecture_notes
            .iter()
            .any(|n| n.contains("longer than the model takes"))
    };
    // Qwen3-30B-A3B's config: 40,960 positions, no rope scaling (its card adds YaRN by hand).
    let s = size(&from_config(&qwen3_moe(), 30.5, Precision::Bf16, 131_072, 1));
    let note = s
        .architecture_notes
        .iter()
        .find(|n| n.contains("longer than"))
        .expect("named");
    assert!(
        note.contains("131,072 tokens") && note.contains("(40,960 tokens)"),
        "{note}"
    );
    assert!(!past(&size(&from_config(
        &qwen3_moe(),
        30.5,
        Precision::Bf16,
        40_960,
        1
    ))));
    // Llama 3.1's rope scaling reaches its 131,072: not second-guessed.
    assert!(!past(&size(&from_config(&llama8b(), 8.0, Precision::Bf16, 131_072, 1))));
    // Without a config, the catalogue's maximum (phi-4: 16,384).
    let s = size(&super::tests::input(RT, Precision::Bf16, "microsoft/phi-4", 32_768, 1));
    assert!(past(&s), "{:?}", s.architecture_notes);
}

#[test]
fn an_fp8_checkpoints_experts_split_only_into_whole_blocks() {
    // Qwen/Qwen3-30B-A3B-FP8 is this config with block-scaled fp8 weights ([128, 128]): vLLM
    // refuses TP 4 and 8 ("768 / 4 = 192 is not divisible by weight quantization block_n = 128",
    // vllm-project/vllm#17569); TP 2 (384) loads.
    let mut cfg = qwen3_moe();
    cfg.insert(
        "quantization_config".into(),
        serde_json::json!({ "quant_method": "fp8", "weight_block_size": [128, 128] }),
    );
    let s = size(&from_config(&cfg, 30.5, Precision::Fp8, 32_768, 64));
    let mut seen = std::collections::BTreeSet::new();
    for o in s.options.iter().filter(|o| o.fits && o.tensor_parallel > 1) {
        let note = o.load_note.as_deref().unwrap_or("");
        let whole_blocks = (768 / o.tensor_parallel) % 128 == 0;
        assert_eq!(
            note.contains("--enable-expert-parallel"),
            !whole_blocks,
            "{} TP {}: {note:?}",
            o.gpu,
            o.tensor_parallel
        );
        seen.insert(o.tensor_parallel);
    }
    assert!(
        seen.iter().any(|tp| (768 / tp) % 128 != 0),
        "a TP that cuts blocks: {seen:?}"
    );
    // The same model quantised when served (bf16 weights, --quantization fp8), or an fp8
    // checkpoint scaled per tensor (no weight_block_size), has no blocks to cut.
    let no_note = |s: &Sizing| {
        s.options
            .iter()
            .all(|o| !o.load_note.as_deref().unwrap_or("").contains("expert-parallel"))
    };
    assert!(no_note(&size(&from_config(
        &qwen3_moe(),
        30.5,
        Precision::Fp8,
        32_768,
        64
    ))));
    cfg.insert(
        "quantization_config".into(),
        serde_json::json!({ "quant_method": "fp8", "activation_scheme": "static" }),
    );
    assert!(no_note(&size(&from_config(&cfg, 30.5, Precision::Fp8, 32_768, 64))));
}

#[test]
fn rope_parameters_of_newer_configs_count_as_scaling() {
    // transformers 4.56+ writes the scaling under `rope_parameters`: YaRN reaches past the
    // positions, so no maximum is named; the default type is no scaling.
    let mut cfg = qwen3_moe();
    cfg.insert(
        "rope_parameters".into(),
        serde_json::json!({ "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768 }),
    );
    let s = size(&from_config(&cfg, 30.5, Precision::Bf16, 131_072, 1));
    assert!(s
        .architecture_notes
        .iter()
        .all(|n| !n.contains("longer than the model takes")));
    cfg.insert(
        "rope_parameters".into(),
        serde_json::json!({ "rope_type": "default", "rope_theta": 1e6 }),
    );
    let s = size(&from_config(&cfg, 30.5, Precision::Bf16, 131_072, 1));
    assert!(s
        .architecture_notes
        .iter()
        .any(|n| n.contains("longer than the model takes")));
}
