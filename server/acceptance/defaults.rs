//! The default card generated from a brief and its sizing. Pure: no I/O.
//!
//! Every default carries a one-line `why` that the UI shows. The rules are in docs/acceptance.md.

use rust_decimal::prelude::ToPrimitive;

use super::model::{Card, Criterion, Op, Threshold, COST_PER_JOB, LINT_ERRORS};
use crate::{
    briefs::model::{Brief, BriefFields},
    evidence::parsers::nccl_expected,
    sizing::{GpuSpec, Sizing, WorkloadKind},
    trials::model::Allocation,
};

/// Share of the per-GPU NVLink figure that `nccl.busbw_peak_gbps` must reach (all-reduce bus
/// bandwidth on healthy 8-GPU NVLink boards is about 45–55 % of the catalogue's bidirectional figure).
pub const NVLINK_BUSBW_SHARE: f64 = 0.35;
/// Share of one direction of a PCIe x16 link that busbw must reach on PCIe-only GPUs.
pub const PCIE_BUSBW_SHARE: f64 = 0.4;
/// Floor for collectives that cross nodes: 40 % of one 400 Gb/s NIC (50 GB/s).
pub const INTER_NODE_BUSBW_FLOOR_GBPS: f64 = 20.0;
/// Share of the expected bus bandwidth of the allocation (data/nccl_expected_busbw.csv) that
/// `nccl.busbw_peak_gbps` must reach. Healthy runs measure 90–100 % of the table (8 × H100: 473.6 of
/// 476 GB/s); 70 % leaves room for another NCCL version or algorithm and still fails a fabric a
/// third short. The flat shares above are the fallback for a GPU the table does not know.
pub const EXPECTED_BUSBW_SHARE: f64 = 0.7;
/// What "saturated" means, shared with the review decision (decision.md "Derived figures").
use crate::thresholds::{KV_CACHE_SATURATED_PCT, PREEMPTIONS_SATURATED_ABOVE};
/// Error rate the card asks for when the brief sets no target.
pub const DEFAULT_ERROR_RATE: f64 = 0.01;
/// Training keeps this share of card memory free at its peak.
pub const TRAINING_MEMORY_SHARE: f64 = 0.95;

/// The allocation of the brief's first trial (`trial_gpu` × `trial_gpu_count`), else the sizing's
/// suggestion (the first fitting option the card's NVIDIA tools can test).
pub fn trial_allocation(brief: &BriefFields, sizing: &Sizing) -> Option<(&'static GpuSpec, u32)> {
    Allocation::resolve(brief.trial_gpu.as_deref(), brief.trial_gpu_count, sizing).map(|a| (a.gpu, a.count))
}

/// Criteria whose default threshold depends on the allocation under test: how many GPUs the
/// machine shows, how fast they talk, and how they are linked.
pub fn depends_on_allocation(key: &str) -> bool {
    key == "gpu.count" || key.starts_with("nccl.") || key.starts_with("topo.")
}

/// Criteria about collectives and links, which mean nothing on a single GPU.
pub fn needs_several_gpus(key: &str) -> bool {
    key.starts_with("nccl.") || key.starts_with("topo.")
}

fn pcie_x16_gbps(generation: u32) -> f64 {
    // One direction of an x16 link: Gen3 ≈ 15.75 GB/s, doubling per generation.
    15.75 * 2f64.powi(generation.saturating_sub(3) as i32)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

struct Builder(Vec<Criterion>);

impl Builder {
    // Each call reads as one row of the card: stage, key, op, threshold, unit, required, why.
    #[allow(clippy::too_many_arguments)]
    fn add(&mut self, stage: u8, key: &str, op: Op, threshold: Threshold, unit: &str, required: bool, why: String) {
        self.0.push(Criterion {
            key: key.to_owned(),
            op,
            threshold,
            unit: unit.to_owned(),
            stage,
            required,
            why: Some(why),
        });
    }

    fn is_true(&mut self, stage: u8, key: &str, required: bool, why: &str) {
        self.add(stage, key, Op::Eq, Threshold::Bool(true), "", required, why.to_owned());
    }
}

/// The default card for `brief`, given its sizing.
pub fn default_card(brief: &BriefFields, sizing: &Sizing) -> Vec<Criterion> {
    default_card_for(brief, trial_allocation(brief, sizing))
}

/// What the card's rules read: the brief, the allocation under test and what kind of work it is.
struct CardInput<'a> {
    brief: &'a BriefFields,
    alloc: Option<(&'static GpuSpec, u32)>,
    /// Training or fine-tuning.
    trains: bool,
    /// Serves a language model (real-time or batch inference; media with a catalogue model).
    serves_llm: bool,
}

impl CardInput<'_> {
    /// The allocation when it has more than one GPU device: what collectives and links need.
    fn several_gpus(&self) -> Option<(&'static GpuSpec, u32)> {
        self.alloc.filter(|(g, n)| n * g.devices_per_card > 1)
    }
}

/// One default of the card: adds its criteria (none when it does not apply).
type CardRule = fn(&mut Builder, &CardInput);

/// The defaults in the card's order: stage 1 (the environment) to stage 5 (the review).
const CARD_RULES: [CardRule; 19] = [
    gpu_count_matches_the_allocation,
    diagnostics_pass,
    no_uncorrected_ecc_errors,
    gpus_are_linked_well,
    collectives_are_fast_and_correct,
    artifacts_load,
    model_is_pinned,
    outputs_parse,
    checkpoint_restores_before_training,
    load_meets_the_briefs_targets,
    default_error_rate,
    kv_cache_does_not_saturate,
    no_preemptions,
    training_keeps_memory_headroom,
    failure_drills,
    restore_after_a_kill,
    alert_fired,
    cost_per_job_under_the_ceiling,
    manifest_passes_the_lint,
];

/// The default card for one allocation under test (a trial's GPU and count).
pub fn default_card_for(brief: &BriefFields, alloc: Option<(&'static GpuSpec, u32)>) -> Vec<Criterion> {
    let kind = brief.workload_kind;
    let input = CardInput {
        brief,
        alloc,
        trains: matches!(kind, WorkloadKind::Training | WorkloadKind::Finetune),
        serves_llm: matches!(kind, WorkloadKind::RealtimeInference | WorkloadKind::BatchInference)
            || (kind == WorkloadKind::Media && brief.catalog_model.is_some()),
    };
    let mut b = Builder(Vec::new());
    for rule in CARD_RULES {
        rule(&mut b, &input);
    }
    b.0
}

// Stage 1: the environment is what was rented, healthy, and its GPUs talk fast enough.

/// `nvidia-smi` lists one machine's GPUs, and the agent runs on one node: an allocation over
/// several nodes is judged node by node (the collective's world size shows they worked together).
fn gpu_count_matches_the_allocation(b: &mut Builder, input: &CardInput) {
    let Some((gpu, count)) = input.alloc else { return };
    let in_node = count.min(gpu.gpus_per_node.max(1));
    let devices = in_node * gpu.devices_per_card;
    let why = if in_node < count {
        format!(
            "The trial allocation is {count} × {} over {} nodes; each machine must show at least {devices} GPU \
             devices (nvidia-smi lists one machine's).",
            gpu.model,
            count.div_ceil(in_node)
        )
    } else {
        format!(
            "The trial allocation is {count} × {}; the machine must show at least {devices} GPU devices.",
            gpu.model
        )
    };
    b.add(
        1,
        "gpu.count",
        Op::Ge,
        Threshold::Number(f64::from(devices)),
        "count",
        true,
        why,
    );
}

fn diagnostics_pass(b: &mut Builder, _: &CardInput) {
    b.is_true(
        1,
        "dcgm.diag.passed",
        true,
        "DCGM diagnostics must run and pass every test (a skip is not a pass) before anything else is trusted.",
    );
}

fn no_uncorrected_ecc_errors(b: &mut Builder, _: &CardInput) {
    b.add(
        1,
        "gpu.ecc_errors_uncorrected",
        Op::Eq,
        Threshold::Number(0.0),
        "count",
        false,
        "Uncorrected ECC errors on a fresh allocation point at a failing card.".to_owned(),
    );
}

/// Whether the GPUs of one node are all joined by NVLink, and how many share a node.
fn nvlink_in_node(gpu: &GpuSpec, count: u32) -> (bool, u32) {
    let in_node = count.min(gpu.gpus_per_node);
    (gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= in_node, in_node)
}

/// NVIDIA GPUs only (`nvidia-smi topo` reads the links): NVLink everywhere when the fabric has it,
/// else (optionally) no hop between CPU sockets.
fn gpus_are_linked_well(b: &mut Builder, input: &CardInput) {
    let Some((gpu, count)) = input.several_gpus() else {
        return;
    };
    if !gpu.vendor.eq_ignore_ascii_case("NVIDIA") {
        return;
    }
    let (nvlink, in_node) = nvlink_in_node(gpu, count);
    if nvlink {
        b.add(
            1,
            "topo.worst_link",
            Op::Le,
            Threshold::Text("NV#".into()),
            "",
            true,
            format!(
                "{} GPUs of {} are joined by {}: every pair must be NVLink (no PCIe or socket hop).",
                in_node,
                gpu.model,
                gpu.fabric_name()
            ),
        );
    } else {
        b.add(
            1,
            "topo.worst_link",
            Op::Le,
            Threshold::Text("NODE".into()),
            "",
            false,
            format!(
                "{} has no NVLink across {in_node} GPUs; keeping them under one CPU socket (no SYS hop) helps collectives.",
                gpu.model
            ),
        );
    }
}

/// The all-reduce bus bandwidth floor for `count` GPUs and why: the expected figure of the
/// topology when the table knows it, else a share of the link (NVLink or PCIe), capped by one NIC
/// when the allocation spans nodes.
fn busbw_floor(gpu: &GpuSpec, count: u32) -> (f64, String) {
    let (nvlink, _) = nvlink_in_node(gpu, count);
    let nodes = count.div_ceil(gpu.gpus_per_node.max(1));
    if let Some(e) = nccl_expected::expected_busbw(&gpu.model, count * gpu.devices_per_card, nodes, None) {
        let basis = format!(
            "{:.0} % of the {} GB/s this topology should do ({})",
            EXPECTED_BUSBW_SHARE * 100.0,
            e.gbps,
            e.basis
        );
        return (e.gbps * EXPECTED_BUSBW_SHARE, basis);
    }
    let (floor, basis) = if nvlink {
        (
            gpu.nvlink_gbs * NVLINK_BUSBW_SHARE,
            format!(
                "{:.0} % of {}'s {} GB/s NVLink",
                NVLINK_BUSBW_SHARE * 100.0,
                gpu.model,
                gpu.nvlink_gbs
            ),
        )
    } else {
        (
            pcie_x16_gbps(gpu.pcie_gen) * PCIE_BUSBW_SHARE,
            format!(
                "{:.0} % of one direction of PCIe Gen{} x16",
                PCIE_BUSBW_SHARE * 100.0,
                gpu.pcie_gen
            ),
        )
    };
    if count > gpu.gpus_per_node {
        return (
            floor.min(INTER_NODE_BUSBW_FLOOR_GBPS),
            "the allocation spans nodes: 40 % of one 400 Gb/s NIC".to_owned(),
        );
    }
    (floor, basis)
}

fn collectives_are_fast_and_correct(b: &mut Builder, input: &CardInput) {
    let Some((gpu, count)) = input.several_gpus() else {
        return;
    };
    let (floor, basis) = busbw_floor(gpu, count);
    b.add(
        1,
        "nccl.busbw_peak_gbps",
        Op::Ge,
        Threshold::Number(round1(floor)),
        "GB/s",
        true,
        format!("All-reduce bus bandwidth across the {count} GPUs must reach {basis}."),
    );
    b.add(
        1,
        "nccl.wrong",
        Op::Eq,
        Threshold::Number(0.0),
        "count",
        true,
        "Any wrong result in nccl-tests is data corruption in the collectives.".to_owned(),
    );
}

// Stage 2: the workload runs the right thing, correctly.

fn artifacts_load(b: &mut Builder, _: &CardInput) {
    b.is_true(
        2,
        "probe.artifact_loaded",
        true,
        "The image loads the model and data artifacts from where the brief says they persist.",
    );
}

fn model_is_pinned(b: &mut Builder, input: &CardInput) {
    let brief = input.brief;
    b.add(
        2,
        "probe.model_pinned",
        Op::Eq,
        Threshold::Bool(true),
        "",
        true,
        match &brief.model_revision {
            Some(rev) => format!("The served model is {} at the pinned revision {rev}.", brief.model_name),
            None => format!(
                "The brief names no revision of {}: pin one so the test is reproducible.",
                brief.model_name
            ),
        },
    );
}

fn outputs_parse(b: &mut Builder, input: &CardInput) {
    if input.trains {
        return;
    }
    b.is_true(
        2,
        "probe.output_format",
        true,
        "Outputs parse in the format the product expects (schema, tokens, media type).",
    );
}

fn checkpoint_restores_before_training(b: &mut Builder, input: &CardInput) {
    if !input.trains {
        return;
    }
    b.is_true(
        2,
        "checkpoint.restore_ok",
        true,
        "A checkpoint is written and restored on this allocation before a long run depends on it.",
    );
}

// Stage 3: representative load meets the brief's targets without saturating.

/// One criterion per target the brief sets.
fn load_meets_the_briefs_targets(b: &mut Builder, input: &CardInput) {
    let t = &input.brief.targets;
    let targets: [(&str, Option<f64>, Op, &str, &str); 6] = [
        (
            "serving.ttft_p95_ms",
            t.ttft_p95_ms,
            Op::Le,
            "ms",
            "Time to first token, p95",
        ),
        // The brief's inter-token target is judged per request, as the SLO attainment and the
        // load plan's goodput judge it: each request's mean time per output token (vLLM's TPOT), not
        // every single gap between tokens (`serving.itl_p95_ms`).
        (
            "serving.tpot_p95_ms",
            t.itl_p95_ms,
            Op::Le,
            "ms",
            "Time per output token, p95 (each request's mean)",
        ),
        (
            "serving.e2e_p95_ms",
            t.e2e_p95_ms,
            Op::Le,
            "ms",
            "End-to-end latency, p95",
        ),
        (
            "serving.output_tokens_per_s",
            t.output_tokens_per_s,
            Op::Ge,
            "tok/s",
            "Output token throughput",
        ),
        (
            "serving.request_throughput_rps",
            t.request_throughput_rps,
            Op::Ge,
            "req/s",
            "Request throughput",
        ),
        ("serving.error_rate", t.error_rate, Op::Le, "fraction", "Error rate"),
    ];
    for (key, target, op, unit, label) in targets {
        if let Some(v) = target {
            b.add(
                3,
                key,
                op,
                Threshold::Number(v),
                unit,
                true,
                format!(
                    "{label} under representative load must be {} the brief's target.",
                    if op == Op::Le { "at or below" } else { "at or above" }
                ),
            );
        }
    }
}

fn default_error_rate(b: &mut Builder, input: &CardInput) {
    if !input.serves_llm || input.brief.targets.error_rate.is_some() {
        return;
    }
    b.add(
        3,
        "serving.error_rate",
        Op::Le,
        Threshold::Number(DEFAULT_ERROR_RATE),
        "fraction",
        false,
        "The brief sets no error-rate target; 1 % failed requests is a starting point.".to_owned(),
    );
}

fn kv_cache_does_not_saturate(b: &mut Builder, input: &CardInput) {
    if !input.serves_llm {
        return;
    }
    b.add(
        3,
        "serving.kv_cache_usage_max_pct",
        Op::Lt,
        Threshold::Number(KV_CACHE_SATURATED_PCT),
        "%",
        true,
        "Memory headroom: KV-cache usage at or above 90 % under load means the server is saturated.".to_owned(),
    );
}

fn no_preemptions(b: &mut Builder, input: &CardInput) {
    if !input.serves_llm {
        return;
    }
    b.add(
        3,
        "serving.preemptions_total",
        Op::Eq,
        Threshold::Number(PREEMPTIONS_SATURATED_ABOVE),
        "count",
        true,
        "Preempted requests mean the KV cache ran out during the load window.".to_owned(),
    );
}

fn training_keeps_memory_headroom(b: &mut Builder, input: &CardInput) {
    let Some((gpu, _)) = input.alloc.filter(|_| input.trains) else {
        return;
    };
    // The GPU's memory as its driver reports it (what `memory.used` is measured against).
    let mib = gpu.memory_bytes() / 1_048_576.0 * TRAINING_MEMORY_SHARE;
    b.add(
        3,
        "gpu.memory_used_mib_max",
        Op::Le,
        Threshold::Number(mib.floor()),
        "MiB",
        true,
        format!(
            "Memory headroom: peak use during a representative step stays under {:.0} % of the {}'s memory.",
            TRAINING_MEMORY_SHARE * 100.0,
            gpu.model
        ),
    );
}

// Stage 4: the failure test.

/// Drain and restart, cache invalidation (not for training), a failing dependency.
fn failure_drills(b: &mut Builder, input: &CardInput) {
    b.is_true(
        4,
        "probe.drain_restart",
        true,
        "Draining and restarting a worker loses no accepted work.",
    );
    if !input.trains {
        b.is_true(
            4,
            "probe.cache_invalidation",
            true,
            "Invalidating a cache (weights, compiled graphs, prompts) is recovered from without wrong outputs.",
        );
    }
    b.is_true(
        4,
        "probe.dependency_failure",
        true,
        "A failing dependency (storage, queue, upstream API) degrades cleanly and recovers.",
    );
}

fn restore_after_a_kill(b: &mut Builder, input: &CardInput) {
    b.is_true(
        4,
        "checkpoint.restore_ok",
        true,
        match &input.brief.restore_plan {
            Some(_) => "After a kill, the brief's restore plan brings back the persisted state.",
            None => "After a kill, persisted state comes back (the brief has no restore plan yet).",
        },
    );
}

fn alert_fired(b: &mut Builder, _: &CardInput) {
    b.is_true(
        4,
        "probe.alert_fired",
        false,
        "The failure fired an alert that reached its owner.",
    );
}

// Stage 5: the review, from figures derived outside the evidence.

fn cost_per_job_under_the_ceiling(b: &mut Builder, input: &CardInput) {
    let brief = input.brief;
    let Some(ceiling) = brief.max_cost_per_job.and_then(|d| d.to_f64()) else {
        return;
    };
    b.add(
        5,
        COST_PER_JOB,
        Op::Le,
        Threshold::Number(ceiling),
        &format!("{}/{}", brief.currency, brief.cost_unit.as_str()),
        true,
        "Cost per completed job (ledger ÷ accepted outputs) must stay under the brief's ceiling.".to_owned(),
    );
}

fn manifest_passes_the_lint(b: &mut Builder, input: &CardInput) {
    if input.brief.k8s_manifest.is_none() {
        return;
    }
    b.add(
        5,
        LINT_ERRORS,
        Op::Eq,
        Threshold::Number(0.0),
        "count",
        true,
        "The brief's Kubernetes manifest must pass the lint (GPU limits, pinned image, secrets).".to_owned(),
    );
}

/// The default card of a brief (never stored; revision 0).
pub fn default_card_of(brief: &Brief) -> Card {
    Card {
        revision: 0,
        is_default: true,
        criteria: default_card(&brief.fields, &brief.fields.sizing()),
        created_by: None,
        created_at: None,
        allocation: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{
        acceptance::model::validate_criteria,
        briefs::model::{validate, BriefInput},
    };

    fn brief(v: serde_json::Value) -> BriefFields {
        let serde_json::Value::Object(map) = v else {
            unreachable!()
        };
        validate(&BriefInput::Json(&map)).unwrap()
    }

    fn find<'a>(card: &'a [Criterion], key: &str, stage: u8) -> Option<&'a Criterion> {
        card.iter().find(|c| c.key == key && c.stage == stage)
    }

    fn base() -> serde_json::Value {
        json!({
            "name": "n", "owner": "o", "model_name": "m", "model_revision": "abc123",
            "params_b": 8, "precision": "bf16", "context_length": 8192, "concurrency": 8,
            "num_layers": 32, "num_kv_heads": 8, "head_dim": 128,
            "data_boundary": "shared-ok", "cost_unit": "request", "currency": "USD",
            "allocation_boundary": "vm",
        })
    }

    fn with(mut v: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    #[test]
    fn single_gpu_realtime_brief() {
        let f = brief(with(
            base(),
            json!({
                "workload_kind": "realtime-inference",
                "targets": { "ttft_p95_ms": 300, "itl_p95_ms": 40, "request_throughput_rps": 5 },
                "max_cost_per_job": "0.002",
                "trial_gpu": "H100 SXM", "trial_gpu_count": 1
            }),
        ));
        let card = default_card(&f, &f.sizing());
        let gpus = find(&card, "gpu.count", 1).unwrap();
        assert_eq!((gpus.op, &gpus.threshold), (Op::Ge, &Threshold::Number(1.0)));
        assert_eq!(
            find(&card, "dcgm.diag.passed", 1).unwrap().threshold,
            Threshold::Bool(true)
        );
        assert!(
            find(&card, "nccl.busbw_peak_gbps", 1).is_none(),
            "one GPU has no collectives"
        );
        assert!(find(&card, "topo.worst_link", 1).is_none());
        assert!(find(&card, "probe.output_format", 2).is_some());
        assert!(
            find(&card, "checkpoint.restore_ok", 2).is_none(),
            "serving restores at stage 4 only"
        );
        let ttft = find(&card, "serving.ttft_p95_ms", 3).unwrap();
        assert_eq!(
            (ttft.op, &ttft.threshold, ttft.unit.as_str()),
            (Op::Le, &Threshold::Number(300.0), "ms")
        );
        assert_eq!(
            find(&card, "serving.tpot_p95_ms", 3).unwrap().threshold,
            Threshold::Number(40.0)
        );
        assert_eq!(find(&card, "serving.request_throughput_rps", 3).unwrap().op, Op::Ge);
        assert!(
            find(&card, "serving.e2e_p95_ms", 3).is_none(),
            "no target, no criterion"
        );
        assert!(
            !find(&card, "serving.error_rate", 3).unwrap().required,
            "a default, not the brief's"
        );
        assert!(find(&card, "serving.kv_cache_usage_max_pct", 3).is_some());
        assert!(find(&card, "serving.preemptions_total", 3).is_some());
        for key in [
            "probe.drain_restart",
            "probe.cache_invalidation",
            "probe.dependency_failure",
            "checkpoint.restore_ok",
        ] {
            assert!(find(&card, key, 4).is_some(), "{key}");
        }
        let cost = find(&card, COST_PER_JOB, 5).unwrap();
        assert_eq!(
            (cost.op, &cost.threshold, cost.unit.as_str()),
            (Op::Le, &Threshold::Number(0.002), "USD/request")
        );
        assert!(find(&card, LINT_ERRORS, 5).is_none(), "no manifest, no lint");
        assert!(
            card.iter().all(|c| c.why.as_deref().is_some_and(|w| !w.is_empty())),
            "every default explains itself"
        );
        let valid = validate_criteria(card, "criteria").expect("the default card passes its own validation");
        assert!(valid.warnings.is_empty(), "{:?}", valid.warnings);
    }

    #[test]
    fn multi_gpu_training_brief() {
        let training_on_h100 = |count: u32| {
            brief(with(
                base(),
                json!({
                    "workload_kind": "training", "params_b": 70, "num_layers": 80, "concurrency": 16,
                    "trial_gpu": "H100 SXM", "trial_gpu_count": count,
                    "restore_plan": "Resume from the newest checkpoint in the bucket."
                }),
            ))
        };
        let f = training_on_h100(8);
        let card = default_card(&f, &f.sizing());
        assert_eq!(find(&card, "gpu.count", 1).unwrap().threshold, Threshold::Number(8.0));
        // Two nodes of eight: each machine shows its own eight.
        let two_nodes = training_on_h100(16);
        let count = find(&default_card(&two_nodes, &two_nodes.sizing()), "gpu.count", 1)
            .unwrap()
            .clone();
        assert_eq!(count.threshold, Threshold::Number(8.0));
        let why = count.why.unwrap_or_default();
        assert!(why.contains("over 2 nodes; each machine"), "{why}");
        let topo = find(&card, "topo.worst_link", 1).unwrap();
        assert_eq!(
            (topo.op, &topo.threshold, topo.required),
            (Op::Le, &Threshold::Text("NV#".into()), true)
        );
        let bw = find(&card, "nccl.busbw_peak_gbps", 1).unwrap();
        assert_eq!(
            (bw.op, &bw.threshold),
            (Op::Ge, &Threshold::Number(333.2)),
            "70 % of the 476 GB/s eight H100 on NVSwitch measure"
        );
        let why = bw.why.as_deref().unwrap_or_default();
        assert!(why.contains("476 GB/s this topology should do"), "{why}");
        assert_eq!(find(&card, "nccl.wrong", 1).unwrap().threshold, Threshold::Number(0.0));
        assert!(find(&card, "checkpoint.restore_ok", 2).unwrap().required);
        assert!(find(&card, "checkpoint.restore_ok", 4).unwrap().required);
        assert!(find(&card, "probe.output_format", 2).is_none());
        assert!(
            card.iter().all(|c| !c.key.starts_with("serving.")),
            "training serves nothing"
        );
        assert!(
            find(&card, "gpu.memory_used_mib_max", 3).is_some(),
            "training headroom from nvidia-smi"
        );
        assert!(find(&card, COST_PER_JOB, 5).is_none(), "no ceiling in the brief");
        validate_criteria(card, "criteria").unwrap();
    }

    #[test]
    fn batch_brief_on_pcie_gpus_with_a_manifest() {
        let f = brief(with(
            base(),
            json!({
                "workload_kind": "batch-inference",
                "targets": { "output_tokens_per_s": 2000, "error_rate": 0.001 },
                "trial_gpu": "L40S", "trial_gpu_count": 2,
                "max_cost_per_job": "0.50", "cost_unit": "batch",
                "k8s_manifest": "apiVersion: v1\nkind: Pod\n"
            }),
        ));
        let card = default_card(&f, &f.sizing());
        let topo = find(&card, "topo.worst_link", 1).unwrap();
        assert_eq!(
            (&topo.threshold, topo.required),
            (&Threshold::Text("NODE".into()), false)
        );
        let bw = find(&card, "nccl.busbw_peak_gbps", 1).unwrap();
        assert_eq!(
            bw.threshold,
            Threshold::Number(17.5),
            "70 % of the 25 GB/s PCIe Gen4 GPUs should do"
        );
        let tput = find(&card, "serving.output_tokens_per_s", 3).unwrap();
        assert_eq!((tput.op, &tput.threshold), (Op::Ge, &Threshold::Number(2000.0)));
        let err = find(&card, "serving.error_rate", 3).unwrap();
        assert_eq!(
            (&err.threshold, err.required),
            (&Threshold::Number(0.001), true),
            "the brief's target wins"
        );
        assert!(find(&card, "serving.ttft_p95_ms", 3).is_none());
        assert_eq!(find(&card, COST_PER_JOB, 5).unwrap().unit, "USD/batch");
        assert_eq!(find(&card, LINT_ERRORS, 5).unwrap().threshold, Threshold::Number(0.0));
        validate_criteria(card, "criteria").unwrap();
    }

    #[test]
    fn nccl_threshold_follows_the_topology() {
        let card = |gpu: &str, count: u32| {
            let f = brief(with(
                base(),
                json!({ "workload_kind": "training", "params_b": 70, "num_layers": 80,
                        "trial_gpu": gpu, "trial_gpu_count": count,
                        "restore_plan": "Resume from the newest checkpoint." }),
            ));
            let card = default_card(&f, &f.sizing());
            find(&card, "nccl.busbw_peak_gbps", 1).map(|c| c.threshold.clone())
        };
        // two nodes of 8: bounded by 8 NICs of 400 Gb/s (47 GB/s each) per node: 0.7 × 376
        assert_eq!(card("H100 SXM", 16), Some(Threshold::Number(263.2)));
        // one B200 node: 0.7 × 720
        assert_eq!(card("B200", 8), Some(Threshold::Number(504.0)));
        // a GPU the table does not know keeps the flat rule: 35 % of MI250X's 800 GB/s
        assert_eq!(card("Instinct MI250X", 2), Some(Threshold::Number(280.0)));
    }

    #[test]
    fn without_a_trial_gpu_the_suggested_option_is_tested() {
        let f = brief(with(base(), json!({ "workload_kind": "realtime-inference" })));
        let sizing = f.sizing();
        let (gpu, count) = trial_allocation(&f, &sizing).unwrap();
        let suggested = crate::trials::model::suggested_option(&sizing).unwrap();
        assert!(suggested.fits);
        assert_eq!((gpu.model.as_str(), count), (suggested.gpu.as_str(), suggested.count));
    }

    // One test per rule of the card, each run alone.

    fn input_of(f: &BriefFields, alloc: Option<(&'static GpuSpec, u32)>) -> Vec<Criterion> {
        default_card_for(f, alloc)
    }

    fn rule_alone(rule: CardRule, f: &BriefFields, alloc: Option<(&'static GpuSpec, u32)>) -> Vec<Criterion> {
        let kind = f.workload_kind;
        let input = CardInput {
            brief: f,
            alloc,
            trains: matches!(kind, WorkloadKind::Training | WorkloadKind::Finetune),
            serves_llm: matches!(kind, WorkloadKind::RealtimeInference | WorkloadKind::BatchInference),
        };
        let mut b = Builder(Vec::new());
        rule(&mut b, &input);
        b.0
    }

    fn keys(card: &[Criterion]) -> Vec<&str> {
        card.iter().map(|c| c.key.as_str()).collect()
    }

    fn gpu(name: &str) -> &'static GpuSpec {
        crate::sizing::gpu_by_name(name).unwrap()
    }

    fn serving() -> BriefFields {
        brief(with(base(), json!({ "workload_kind": "realtime-inference" })))
    }

    fn training() -> BriefFields {
        brief(with(base(), json!({ "workload_kind": "training" })))
    }

    #[test]
    fn the_rules_make_the_whole_card_in_order() {
        let f = serving();
        let alloc = Some((gpu("H100 SXM"), 8));
        let whole: Vec<Criterion> = CARD_RULES.iter().flat_map(|r| rule_alone(*r, &f, alloc)).collect();
        assert_eq!(whole, input_of(&f, alloc));
        let stages: Vec<u8> = whole.iter().map(|c| c.stage).collect();
        assert!(stages.windows(2).all(|w| w[0] <= w[1]), "stage order: {stages:?}");
    }

    #[test]
    fn gpu_count_counts_devices_of_the_allocation() {
        let f = serving();
        assert!(rule_alone(gpu_count_matches_the_allocation, &f, None).is_empty());
        let card = rule_alone(gpu_count_matches_the_allocation, &f, Some((gpu("H100 SXM"), 4)));
        assert_eq!(card[0].threshold, Threshold::Number(4.0));
    }

    #[test]
    fn diagnostics_are_required_and_ecc_advisory() {
        let f = serving();
        let diag = rule_alone(diagnostics_pass, &f, None);
        assert_eq!((diag[0].key.as_str(), diag[0].required), ("dcgm.diag.passed", true));
        let ecc = rule_alone(no_uncorrected_ecc_errors, &f, None);
        assert_eq!(
            (ecc[0].threshold.clone(), ecc[0].required),
            (Threshold::Number(0.0), false)
        );
    }

    #[test]
    fn links_are_checked_on_several_nvidia_gpus_only() {
        let f = serving();
        assert!(rule_alone(gpus_are_linked_well, &f, Some((gpu("H100 SXM"), 1))).is_empty());
        let nvlink = rule_alone(gpus_are_linked_well, &f, Some((gpu("H100 SXM"), 8)));
        assert_eq!(
            (nvlink[0].threshold.clone(), nvlink[0].required),
            (Threshold::Text("NV#".into()), true)
        );
    }

    #[test]
    fn the_busbw_floor_prefers_the_topologys_expected_figure() {
        let h100 = gpu("H100 SXM");
        let (floor, basis) = busbw_floor(h100, 8);
        assert!(basis.contains("this topology should do"), "{basis}");
        assert!(floor > 300.0, "{floor}");
        let card = rule_alone(collectives_are_fast_and_correct, &serving(), Some((h100, 8)));
        assert_eq!(keys(&card), ["nccl.busbw_peak_gbps", "nccl.wrong"]);
        assert!(rule_alone(collectives_are_fast_and_correct, &serving(), Some((h100, 1))).is_empty());
    }

    #[test]
    fn stage_2_checks_outputs_when_serving_and_checkpoints_when_training() {
        let (s, t) = (serving(), training());
        assert_eq!(keys(&rule_alone(artifacts_load, &s, None)), ["probe.artifact_loaded"]);
        assert!(rule_alone(model_is_pinned, &s, None)[0]
            .why
            .as_deref()
            .unwrap()
            .contains("pinned revision abc123"));
        assert_eq!(rule_alone(outputs_parse, &s, None).len(), 1);
        assert!(rule_alone(outputs_parse, &t, None).is_empty());
        assert!(rule_alone(checkpoint_restores_before_training, &s, None).is_empty());
        assert_eq!(
            keys(&rule_alone(checkpoint_restores_before_training, &t, None)),
            ["checkpoint.restore_ok"]
        );
    }

    #[test]
    fn each_target_the_brief_sets_is_a_required_load_criterion() {
        let f = brief(with(
            base(),
            json!({ "workload_kind": "realtime-inference", "targets": { "e2e_p95_ms": 900, "output_tokens_per_s": 50 } }),
        ));
        let card = rule_alone(load_meets_the_briefs_targets, &f, None);
        assert_eq!(keys(&card), ["serving.e2e_p95_ms", "serving.output_tokens_per_s"]);
        assert_eq!((card[0].op, card[1].op), (Op::Le, Op::Ge));
        assert!(card.iter().all(|c| c.required && c.stage == 3));
    }

    #[test]
    fn serving_gets_a_default_error_rate_and_saturation_checks() {
        let f = serving();
        assert_eq!(
            rule_alone(default_error_rate, &f, None)[0].threshold,
            Threshold::Number(DEFAULT_ERROR_RATE)
        );
        let set = brief(with(
            base(),
            json!({ "workload_kind": "realtime-inference", "targets": { "error_rate": 0.001 } }),
        ));
        assert!(
            rule_alone(default_error_rate, &set, None).is_empty(),
            "the brief's own target wins"
        );
        assert_eq!(
            rule_alone(kv_cache_does_not_saturate, &f, None)[0].threshold,
            Threshold::Number(KV_CACHE_SATURATED_PCT)
        );
        assert_eq!(rule_alone(no_preemptions, &f, None)[0].op, Op::Eq);
        let t = training();
        for rule in [default_error_rate, kv_cache_does_not_saturate, no_preemptions] {
            assert!(rule_alone(rule, &t, None).is_empty());
        }
    }

    #[test]
    fn training_keeps_memory_headroom_on_its_gpu() {
        let h100 = gpu("H100 SXM");
        assert!(rule_alone(training_keeps_memory_headroom, &serving(), Some((h100, 1))).is_empty());
        assert!(rule_alone(training_keeps_memory_headroom, &training(), None).is_empty());
        let card = rule_alone(training_keeps_memory_headroom, &training(), Some((h100, 1)));
        let Threshold::Number(mib) = card[0].threshold else {
            panic!("a number")
        };
        assert!(mib < h100.memory_bytes() / 1_048_576.0, "{mib}");
    }

    #[test]
    fn stage_4_drills_failures_restores_and_alerts() {
        assert_eq!(
            keys(&rule_alone(failure_drills, &serving(), None)),
            [
                "probe.drain_restart",
                "probe.cache_invalidation",
                "probe.dependency_failure"
            ]
        );
        assert_eq!(
            keys(&rule_alone(failure_drills, &training(), None)),
            ["probe.drain_restart", "probe.dependency_failure"]
        );
        let restore = rule_alone(restore_after_a_kill, &serving(), None);
        assert!(restore[0].why.as_deref().unwrap().contains("no restore plan yet"));
        assert!(!rule_alone(alert_fired, &serving(), None)[0].required);
    }

    #[test]
    fn stage_5_follows_the_ceiling_and_the_manifest() {
        let f = serving();
        assert!(rule_alone(cost_per_job_under_the_ceiling, &f, None).is_empty());
        assert!(rule_alone(manifest_passes_the_lint, &f, None).is_empty());
        let g = brief(with(
            base(),
            json!({ "workload_kind": "realtime-inference", "max_cost_per_job": "0.5", "k8s_manifest": "kind: Pod" }),
        ));
        let cost = rule_alone(cost_per_job_under_the_ceiling, &g, None);
        assert_eq!(
            (cost[0].threshold.clone(), cost[0].unit.as_str()),
            (Threshold::Number(0.5), "USD/request")
        );
        assert_eq!(keys(&rule_alone(manifest_passes_the_lint, &g, None)), [LINT_ERRORS]);
    }
}
