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

/// The default card for one allocation under test (a trial's GPU and count).
pub fn default_card_for(brief: &BriefFields, alloc: Option<(&'static GpuSpec, u32)>) -> Vec<Criterion> {
    let kind = brief.workload_kind;
    let trains = matches!(kind, WorkloadKind::Training | WorkloadKind::Finetune);
    let serves_llm = matches!(kind, WorkloadKind::RealtimeInference | WorkloadKind::BatchInference)
        || (kind == WorkloadKind::Media && brief.catalog_model.is_some());
    let mut b = Builder(Vec::new());

    // Stage 1: the environment is what was rented, healthy, and its GPUs talk fast enough.
    if let Some((gpu, count)) = alloc {
        let devices = count * gpu.devices_per_card;
        b.add(
            1,
            "gpu.count",
            Op::Ge,
            Threshold::Number(f64::from(devices)),
            "count",
            true,
            format!(
                "The trial allocation is {count} × {}; the machine must show at least {devices} GPU devices.",
                gpu.model
            ),
        );
    }
    b.is_true(
        1,
        "dcgm.diag.passed",
        true,
        "DCGM diagnostics must run and pass every test (a skip is not a pass) before anything else is trusted.",
    );
    b.add(
        1,
        "gpu.ecc_errors_uncorrected",
        Op::Eq,
        Threshold::Number(0.0),
        "count",
        false,
        "Uncorrected ECC errors on a fresh allocation point at a failing card.".to_owned(),
    );
    if let Some((gpu, count)) = alloc.filter(|(g, n)| n * g.devices_per_card > 1) {
        let in_node = count.min(gpu.gpus_per_node);
        let nvlink = gpu.nvlink_gbs > 0.0 && gpu.fabric_gpus >= in_node;
        if gpu.vendor.eq_ignore_ascii_case("NVIDIA") {
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
        let nodes = count.div_ceil(gpu.gpus_per_node.max(1));
        let expected = nccl_expected::expected_busbw(&gpu.model, count * gpu.devices_per_card, nodes, None);
        let mut floor = if nvlink {
            gpu.nvlink_gbs * NVLINK_BUSBW_SHARE
        } else {
            pcie_x16_gbps(gpu.pcie_gen) * PCIE_BUSBW_SHARE
        };
        let mut basis = if nvlink {
            format!(
                "{:.0} % of {}'s {} GB/s NVLink",
                NVLINK_BUSBW_SHARE * 100.0,
                gpu.model,
                gpu.nvlink_gbs
            )
        } else {
            format!(
                "{:.0} % of one direction of PCIe Gen{} x16",
                PCIE_BUSBW_SHARE * 100.0,
                gpu.pcie_gen
            )
        };
        if count > gpu.gpus_per_node {
            floor = floor.min(INTER_NODE_BUSBW_FLOOR_GBPS);
            basis = "the allocation spans nodes: 40 % of one 400 Gb/s NIC".to_owned();
        }
        if let Some(e) = expected {
            floor = e.gbps * EXPECTED_BUSBW_SHARE;
            basis = format!(
                "{:.0} % of the {} GB/s this topology should do ({})",
                EXPECTED_BUSBW_SHARE * 100.0,
                e.gbps,
                e.basis
            );
        }
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
    b.is_true(
        2,
        "probe.artifact_loaded",
        true,
        "The image loads the model and data artifacts from where the brief says they persist.",
    );
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
    if !trains {
        b.is_true(
            2,
            "probe.output_format",
            true,
            "Outputs parse in the format the product expects (schema, tokens, media type).",
        );
    }
    if trains {
        b.is_true(
            2,
            "checkpoint.restore_ok",
            true,
            "A checkpoint is written and restored on this allocation before a long run depends on it.",
        );
    }

    // Stage 3: representative load meets the brief's targets without saturating.
    let t = &brief.targets;
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
    if serves_llm {
        if t.error_rate.is_none() {
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
        b.add(
            3,
            "serving.kv_cache_usage_max_pct",
            Op::Lt,
            Threshold::Number(KV_CACHE_SATURATED_PCT),
            "%",
            true,
            "Memory headroom: KV-cache usage at or above 90 % under load means the server is saturated.".to_owned(),
        );
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
    if trains {
        if let Some((gpu, _)) = alloc {
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
    }

    // Stage 4: the failure test.
    b.is_true(
        4,
        "probe.drain_restart",
        true,
        "Draining and restarting a worker loses no accepted work.",
    );
    if !trains {
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
    b.is_true(
        4,
        "checkpoint.restore_ok",
        true,
        match &brief.restore_plan {
            Some(_) => "After a kill, the brief's restore plan brings back the persisted state.",
            None => "After a kill, persisted state comes back (the brief has no restore plan yet).",
        },
    );
    b.is_true(
        4,
        "probe.alert_fired",
        false,
        "The failure fired an alert that reached its owner.",
    );

    // Stage 5: the review, from figures derived outside the evidence.
    if let Some(ceiling) = brief.max_cost_per_job.and_then(|d| d.to_f64()) {
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
    if brief.k8s_manifest.is_some() {
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
    b.0
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
        let f = brief(with(
            base(),
            json!({
                "workload_kind": "training", "params_b": 70, "num_layers": 80, "concurrency": 16,
                "trial_gpu": "H100 SXM", "trial_gpu_count": 8,
                "restore_plan": "Resume from the newest checkpoint in the bucket."
            }),
        ));
        let card = default_card(&f, &f.sizing());
        assert_eq!(find(&card, "gpu.count", 1).unwrap().threshold, Threshold::Number(8.0));
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
}
