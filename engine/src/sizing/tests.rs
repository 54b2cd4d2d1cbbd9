//! Catalogue, contract and rule tests, plus the helpers `worked_examples` uses.

use super::catalog::{parse_gpus, parse_models, raw_csvs};
use super::*;

#[track_caller]
pub(super) fn close(actual: f64, expected: f64, tol: f64) {
    assert!(
        (actual - expected).abs() <= tol,
        "expected {expected} ± {tol}, got {actual}"
    );
}

pub(super) fn input(kind: WorkloadKind, p: Precision, hf: &str, ctx: u64, conc: u64) -> SizingInput {
    SizingInput::from_catalog(kind, p, model_by_hf_id(hf).unwrap(), ctx, conc)
}

pub(super) fn option<'a>(s: &'a Sizing, gpu: &str) -> &'a SizingOption {
    s.options.iter().find(|o| o.gpu == gpu).unwrap()
}

pub(super) const RT: WorkloadKind = WorkloadKind::RealtimeInference;
/// Bytes in a MiB, the unit the driver reports GPU memory in.
pub(super) const MIB: f64 = 1_048_576.0;

/// Checks that every option the engine calls fitting can load — a valid tensor-parallel
/// degree, TP × PP = the devices (data-parallel attention: TP 1 × PP 1), a precision the GPU
/// runs — and returns how many fit.
#[track_caller]
pub(super) fn fitting_options_load(input: &SizingInput, s: &Sizing) -> usize {
    let a = &input.architecture;
    let mut fitting = 0;
    for o in s.options.iter().filter(|o| o.fits) {
        fitting += 1;
        let g = gpu_by_name(&o.gpu).unwrap();
        assert!(
            parallelism::tp_valid(o.tensor_parallel, a.num_attention_heads, a.num_kv_heads)
                && a.state.is_none_or(|s| s.tp_valid(o.tensor_parallel)),
            "{} TP {}",
            o.gpu,
            o.tensor_parallel
        );
        let dp_attention = o
            .load_note
            .as_deref()
            .is_some_and(|n| n.contains("data-parallel attention"));
        let training = matches!(input.workload_kind, WorkloadKind::Training | WorkloadKind::Finetune);
        let devices = if dp_attention || training {
            1
        } else {
            o.count * g.devices_per_card
        };
        assert_eq!(o.tensor_parallel * o.pipeline_parallel, devices, "{}", o.gpu);
        // Serving-engine settings are never offered to training and fine-tuning.
        assert!(
            !training || !o.load_note.as_deref().unwrap_or_default().contains("--"),
            "{}: {:?}",
            o.gpu,
            o.load_note
        );
        assert!(o.pipeline_parallel <= a.num_layers, "{}", o.gpu);
        assert!(
            !matches!(
                precision::support(input.precision, a.moe.is_some(), g),
                precision::Support::Refused { .. }
            ),
            "{} cannot run {}",
            o.gpu,
            input.precision.as_str()
        );
    }
    fitting
}

#[test]
fn catalogues_parse_and_kv_bytes_match_the_architecture() {
    let (m, g) = raw_csvs();
    let parsed_models = parse_models(m).unwrap();
    let parsed_gpus = parse_gpus(g).unwrap();
    assert_eq!(parsed_models.len(), 30);
    assert_eq!(parsed_gpus.len(), 25);
    for m in &parsed_models {
        // Only the attention layers hold KV (a hybrid's state layers keep a constant state).
        let full = 2 * u64::from(m.kv_layers()) * u64::from(m.num_kv_heads) * u64::from(m.head_dim) * 2;
        match m.attention {
            Attention::Gqa | Attention::Mha => {
                assert_eq!(m.kv_bytes_per_token_bf16, full, "{}", m.hf_id)
            }
            // MLA: (kv_lora_rank 512 + rope 64) × layers × 2 B, far below the expanded form.
            Attention::Mla => {
                let latent = u64::from(m.kv_lora_rank + m.qk_rope_head_dim);
                assert_eq!(latent, 576);
                assert_eq!(m.kv_bytes_per_token_bf16, latent * u64::from(m.kv_layers()) * 2);
                // (Kimi K2 has half the heads of DeepSeek-V3: 28× rather than 57×.)
                assert!(m.kv_bytes_per_token_bf16 < full / 25);
            }
        }
        if m.is_moe() {
            // shared + experts × k/E ≈ the card's active parameters (gpt-oss's cards exclude
            // the input embedding: 5.71 vs 5.1 and 4.18 vs 3.6).
            let active = m.params_b - m.expert_params_b
                + m.expert_params_b * f64::from(m.experts_per_token) / f64::from(m.num_experts);
            assert!((active / m.active_params_b - 1.0).abs() < 0.2, "{}: {active}", m.hf_id);
        }
        assert!(!m.source.is_empty());
        // Rows cite primary sources (repository, path and commit, or the vendor page).
        assert!(!m.source.contains("shared/"), "{}", m.hf_id);
    }
    for g in &parsed_gpus {
        assert!(!g.source.contains("shared/"), "{}", g.model);
        assert_eq!(g.compute_capability.is_some(), g.is_nvidia(), "{}", g.model);
    }
    assert_eq!(models(), &parsed_models[..]);
    assert_eq!(gpus(), &parsed_gpus[..]);
    assert!(parse_models("hf_id,name\nx,y\n").is_err());
    assert!(parse_gpus("vendor,model\n").is_err());
}

#[test]
fn every_gpu_row_names_the_source_of_its_driver_memory() {
    let readme = include_str!("../../../data/README.md");
    for g in gpus() {
        let mib = g
            .memory_total_mib
            .map_or_else(|| "—".to_owned(), |m| crate::figures::count(m as i64));
        let row = format!("| {} | {mib} | ", g.model);
        let line = readme
            .lines()
            .find(|l| l.starts_with(&row))
            .unwrap_or_else(|| panic!("data/README.md has no source row `{row}`"));
        assert!(line.len() > row.len() + 20, "{line}");
    }
}

#[test]
fn lookups_are_case_insensitive_and_memory_is_converted() {
    assert_eq!(
        model_by_hf_id("META-LLAMA/llama-3.1-70b-instruct").unwrap().num_layers,
        80
    );
    assert!(model_by_hf_id("nope/nope").is_none());
    let h100 = gpu_by_name("h100 sxm").unwrap();
    // The driver reports 81,559 MiB = 79.65 GiB (the datasheet's "80 GB" read as 80e9 bytes
    // would be 74.51 GiB, 6.5 % short of what vLLM's utilisation multiplies).
    close(h100.memory_gib, 81_559.0 / 1024.0, 1e-9);
    assert_eq!(h100.memory_bytes(), 81_559.0 * MIB);
    assert_eq!(h100.memory_gb, 80.0);
    // A100 80GB: 81,920 MiB = 80 GiB exactly.
    assert_eq!(gpu_by_name("A100 80GB SXM").unwrap().memory_gib, 80.0);
    // Without a driver figure the datasheet's decimal GB is used.
    let mi325x = gpu_by_name("Instinct MI325X").unwrap();
    assert_eq!((mi325x.memory_total_mib, mi325x.memory_bytes()), (None, 256e9));
    assert!(gpu_by_name("H100").is_none());
}

#[test]
fn enums_round_trip_strings_and_serde() {
    for k in WorkloadKind::ALL {
        assert_eq!(k.as_str().parse::<WorkloadKind>(), Ok(k));
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
    for p in Precision::ALL {
        assert_eq!(p.as_str().parse::<Precision>(), Ok(p));
        assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
    }
    assert_eq!("realtime-inference".parse(), Ok(WorkloadKind::RealtimeInference));
    assert!("Realtime".parse::<WorkloadKind>().is_err());
    assert!("int2".parse::<Precision>().is_err());
}

#[test]
fn options_are_ordered_and_counts_are_tp_friendly() {
    let s = size(&input(RT, Precision::Bf16, "Qwen/Qwen2.5-72B-Instruct", 32768, 8));
    assert_eq!(s.options.len(), gpus().len());
    let rented = |o: &SizingOption| f64::from(o.count) * gpu_by_name(&o.gpu).unwrap().memory_bytes();
    let fitting: Vec<_> = s.options.iter().take_while(|o| o.fits).collect();
    assert!(!fitting.is_empty());
    assert!(s.options[fitting.len()..].iter().all(|o| !o.fits));
    for w in fitting.windows(2) {
        assert!(rented(w[0]) <= rented(w[1]), "{} before {}", w[0].gpu, w[1].gpu);
        if rented(w[0]) == rented(w[1]) {
            assert!(w[0].count <= w[1].count);
        }
    }
    for o in &s.options {
        assert!(
            [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64].contains(&o.count),
            "{}",
            o.count
        );
        assert_eq!(o.interconnect_note.is_some(), o.count > 1 || o.gpu == "Instinct MI250X");
        assert!(o.headroom_pct >= 0.0 || !o.fits);
    }
    // The fitting count is the smallest: one step down does not fit.
    let h100 = option(&s, "H100 SXM");
    assert!(h100.count > 1);
}

#[test]
fn pcie_only_multi_gpu_gets_a_warning() {
    let s = size(&input(
        RT,
        Precision::Bf16,
        "meta-llama/Llama-3.1-70B-Instruct",
        8192,
        16,
    ));
    let l40s = option(&s, "L40S");
    assert_eq!(l40s.count, 8);
    let note = l40s.interconnect_note.as_deref().unwrap();
    assert!(note.contains("PCIe only") && note.contains("replicas"), "{note}");
    let a100p = option(&s, "A100 80GB PCIe");
    assert!(a100p.interconnect_note.as_deref().unwrap().contains("joins only 2"));
}

#[test]
fn kv_replicates_when_tp_exceeds_kv_heads() {
    // Qwen3-30B-A3B has 32 heads over 4 KV heads: at TP 8 each GPU holds a quarter of the KV,
    // not an eighth.
    let i = input(RT, Precision::Bf16, "Qwen/Qwen3-30B-A3B", 32768, 64);
    let fp = memory::footprint(&i);
    let t4 = gpu_by_name("T4").unwrap();
    let (_, kv8) = options::per_card(&fp, t4, 8);
    let (_, kv4) = options::per_card(&fp, t4, 4);
    assert_eq!(kv8, kv4);
    assert_eq!(kv4, fp.dynamic / 4.0);
    // Across nodes pipeline stages still split it: 16 GPUs = TP 8 (4-way KV) × PP 2.
    let (_, kv16) = options::per_card(&fp, t4, 16);
    assert_eq!(kv16, fp.dynamic / 8.0);
    // Qwen2.5-7B's 28 heads cannot be split 8 ways (this test once assumed TP 8, which vLLM
    // refuses): 8 GPUs run TP 4 × PP 2, and the two stages halve the quarter again.
    let q = input(RT, Precision::Bf16, "Qwen/Qwen2.5-7B-Instruct", 32768, 64);
    let fq = memory::footprint(&q);
    assert_eq!(options::per_card(&fq, t4, 8).1, fq.dynamic / 8.0);
    let s = size(&q);
    for o in s.options.iter().filter(|o| o.count == 8) {
        assert_eq!((o.tensor_parallel, o.pipeline_parallel), (4, 2), "{}", o.gpu);
    }
}

#[test]
fn too_large_for_any_count() {
    let mut i = input(RT, Precision::Bf16, "meta-llama/Llama-3.1-405B-Instruct", 131072, 64);
    i.params_b = 10_000.0; // 20e12 B of weights > 64 × 256 GB
    let s = size(&i);
    assert!(s
        .options
        .iter()
        .all(|o| !o.fits && o.count == 64 && o.headroom_pct < 0.0));
    // Closest to fitting first: the 256 GB MI325X.
    assert_eq!(s.options[0].gpu, "Instinct MI325X");
    close(s.overhead_gib, 64.0 * 38.4e9 / 1_073_741_824.0, 0.01);
}

#[test]
fn media_has_no_kv_without_a_catalogue_model_and_fp32_kv_is_4_bytes() {
    let mut i = input(
        WorkloadKind::Media,
        Precision::Fp16,
        "meta-llama/Llama-3.2-1B-Instruct",
        4096,
        4,
    );
    i.architecture = Architecture::bare(16, 8, 64);
    i.params_b = 2.6; // a diffusion model: 2.6e9 × 2 B = 4.84 GiB, no KV cache
    let s = size(&i);
    assert_eq!(s.kv_cache_gib, 0.0);
    close(s.weights_gib, 4.84, 0.01);
    assert!(option(&s, "L4").decode_tokens_per_s_max > 0.0);
    // fp32: Llama 3.2 1B KV 2 × 16 × 8 × 64 × 4 B = 65,536 B/token × 4096 × 4 = 1 GiB.
    let f = size(&input(RT, Precision::Fp32, "meta-llama/Llama-3.2-1B-Instruct", 4096, 4));
    close(f.kv_cache_gib, 1.0, 1e-9);
}

#[test]
fn json_has_exactly_the_contract_fields() {
    let s = size(&input(RT, Precision::Bf16, "meta-llama/Llama-3.1-8B-Instruct", 4000, 3));
    // 4000 tokens round up to 4000 (a multiple of 16); 4001 would take 4016.
    assert_eq!(memory::kv_tokens(4001), 4016);
    let v = serde_json::to_value(&s).unwrap();
    let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "architecture_notes",
            "billing_advice",
            "kv_bytes_per_token",
            "kv_cache_gib",
            "options",
            "overhead_gib",
            "state_gib",
            "total_gib",
            "weights_gib"
        ]
    );
    assert_eq!(v["state_gib"], 0.0, "no state layers in a plain transformer");
    let mut okeys: Vec<_> = v["options"][0].as_object().unwrap().keys().cloned().collect();
    okeys.sort();
    assert_eq!(
        okeys,
        [
            "count",
            "decode_tokens_per_s_max",
            "fits",
            "gpu",
            "headroom_pct",
            "interconnect_note",
            "load_note",
            "memory_gib",
            "pipeline_parallel",
            "tensor_parallel"
        ]
    );
    // 131,072 B per token (2 × 32 × 8 × 128 × 2), no window to average in.
    assert_eq!(v["kv_bytes_per_token"], 131_072);
    assert_eq!(v["architecture_notes"], serde_json::json!([]));
    assert!(v["options"][0]["interconnect_note"].is_null());
    for k in WorkloadKind::ALL {
        assert!(!billing_advice(k).is_empty());
    }
}

#[test]
fn extreme_validated_inputs_stay_finite() {
    for kind in WorkloadKind::ALL {
        for p in Precision::ALL {
            for (params, ctx, conc) in [(10_000.0, 10_000_000, 100_000), (0.001, 0, 0), (0.5, 1, 1)] {
                let m = model_by_hf_id("deepseek-ai/DeepSeek-V3").unwrap();
                for architecture in [Architecture::bare(1, 1, 1), Architecture::from_catalog(m)] {
                    let s = size(&SizingInput {
                        workload_kind: kind,
                        precision: p,
                        params_b: params,
                        context_length: ctx,
                        concurrency: conc,
                        architecture,
                        architecture_notes: Vec::new(),
                        kv_cache_dtype: KvCacheDtype::Auto,
                        speculative_decoding: false,
                    });
                    let all = [s.weights_gib, s.kv_cache_gib, s.overhead_gib, s.total_gib];
                    assert!(all.iter().all(|x| x.is_finite() && *x >= 0.0), "{s:?}");
                    assert!(s
                        .options
                        .iter()
                        .all(|o| o.headroom_pct.is_finite() && o.decode_tokens_per_s_max.is_finite()));
                }
            }
        }
    }
}

#[test]
fn no_fitting_option_is_one_the_engine_would_refuse_to_load() {
    let mut fitting = 0;
    for m in models() {
        for p in Precision::ALL {
            for kind in [RT, WorkloadKind::Training] {
                for (ctx, conc) in [(4096, 1), (131_072, 32)] {
                    let i = SizingInput::from_catalog(kind, p, m, ctx, conc);
                    fitting += fitting_options_load(&i, &size(&i));
                }
            }
        }
    }
    assert!(fitting > 1000, "{fitting}");
}

#[test]
fn fitting_options_are_ordered_by_the_memory_the_page_shows() {
    // The page shows the driver's memory per GPU (L40: 44.99 GiB, RTX 6000 Ada: 47.99 GiB), so
    // the order follows that figure × the count, not the datasheet's (both "48 GB").
    let mut compared = 0;
    for hf in [
        "Qwen/Qwen2.5-7B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
    ] {
        let model = model_by_hf_id(hf).expect("a catalogue model");
        let s = size(&SizingInput::from_catalog(RT, Precision::Bf16, model, 8192, 8));
        let shown: Vec<(f64, &str)> = s
            .options
            .iter()
            .filter(|o| o.fits)
            .map(|o| {
                (
                    gpu_by_name(&o.gpu).unwrap().memory_gib * f64::from(o.count),
                    o.gpu.as_str(),
                )
            })
            .collect();
        // (2 × L4 and 1 × L40S rent the same 46,068 MiB: a tie, fewer GPUs first.)
        for pair in shown.windows(2) {
            assert!(
                pair[0].0 <= pair[1].0 + 1e-9,
                "{hf}: {:?} listed before {:?}",
                pair[0],
                pair[1]
            );
        }
        let at = |gpu: &str| shown.iter().position(|(_, g)| *g == gpu);
        if let (Some(l40), Some(ada)) = (at("L40"), at("RTX 6000 Ada")) {
            assert!(l40 < ada, "{hf}: L40 (44.99 GiB) before RTX 6000 Ada (47.99 GiB)");
            compared += 1;
        }
    }
    assert!(compared > 0, "L40 and RTX 6000 Ada both fit at least one of the briefs");
}
