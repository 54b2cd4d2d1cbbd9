//! The test plan of one trial, written from its brief, its allocation, the sizing and the card.
//! Pure: no I/O. The rules are in docs/test-plan.md; in short:
//!
//! * every criterion of the card that applies to the trial (collectives and links are `n/a` on one
//!   GPU) is fed by a step of its own stage, or listed as not covered with how to send it;
//! * stage by stage the steps are, in order: `nvidia-smi -L`, `nvidia-smi topo -m`,
//!   `nvidia-smi -q -x`, `dcgmi discovery --list`, `dcgmi diag -r N -j` (N by stage:
//!   [`diag_level`]), nccl-tests `all_reduce_perf` (one process with `-g N` inside a node, one rank
//!   per GPU under `mpirun` or `srun` across nodes), a dcgm-exporter scrape, the load sweep, the
//!   vLLM log, the probes and checkpoint files the harness writes, and what the server or a person
//!   does (the ledger, the manifest lint);
//! * the load sweep brackets the brief's need: offered rates from a tenth to one and a half times
//!   the predicted capacity of the allocation ([`predicted_capacity_rps`]), plus the brief's
//!   `expected_peak_rps` and its request-throughput target, each a `vllm bench serve` run at the
//!   brief's lengths ([`lengths`]) with p50/p95/p99 of TTFT, TPOT, ITL and E2E, per-request data,
//!   and `--goodput` from the brief's targets; vLLM and dcgm-exporter are scraped before and after
//!   each point under one window id.
//!
//! This file holds what a plan is written from, what every stage of it reads and the plan's
//! assembly; the steps per source are in `steps.rs`, the tools' command lines in `commands.rs` and
//! the load's numbers in `load.rs`.

mod commands;
mod load;
mod steps;

pub use crate::collect::plan::diag_level;
pub use commands::nccl_max_bytes;
pub use load::{
    fmt_num, lengths, predicted_capacity_rps, prompts_at, round_sig, sweep_rates, CAPACITY_SHARES,
    DEFAULT_OUTPUT_TOKENS, MAX_PROMPTS, MIN_PROMPTS, PEAK_CEILING_SHARE, POINT_SECONDS,
};

use self::{
    commands::serve_hint,
    load::{goodput_targets, load_design},
    steps::{source_of, Source, STAGE_STEPS},
};
use crate::{
    acceptance::{
        defaults::needs_several_gpus,
        model::{stage_name, Criterion},
    },
    briefs::model::BriefFields,
    collect::plan::{
        GoodputTarget, NotCovered, PlanBrief, PlanCommand, PlanStage, PlanStep, PlanTrial, Runner, TestPlan, Variable,
        PLAN_FORMAT,
    },
    ids::{BriefId, TrialId},
    sizing::{Sizing, SizingOption},
    trials::model::Allocation,
};

/// What a plan is written from.
pub struct PlanInput<'a> {
    pub brief_id: BriefId,
    pub brief: &'a BriefFields,
    pub sizing: &'a Sizing,
    pub trial_id: TrialId,
    pub trial_name: &'a str,
    pub allocation: Option<&'a Allocation>,
    /// The criteria that apply to this trial (`acceptance::service::criteria_for_trial`).
    pub criteria: &'a [Criterion],
    pub card_revision: i32,
}

/// The `${NAME}`s the commands use.
pub const VLLM_URL: &str = "VLLM_URL";
pub const DCGM_EXPORTER_URL: &str = "DCGM_EXPORTER_URL";
pub const OUT: &str = "OUT";
pub const PROBES: &str = "PROBES";
pub const VLLM_LOG: &str = "VLLM_LOG";
pub const HOSTFILE: &str = "HOSTFILE";

fn model_name(brief: &BriefFields) -> String {
    brief.catalog_model.clone().unwrap_or_else(|| brief.model_name.clone())
}

/// What every stage of one trial's plan reads: the allocation under test and the load the brief
/// implies.
struct PlanShared<'a> {
    input: &'a PlanInput<'a>,
    brief: &'a BriefFields,
    alloc: Option<&'a Allocation>,
    /// GPU devices of the allocation (at least 1).
    devices: u32,
    /// The sizing's option for the allocation's GPU.
    option: Option<&'a SizingOption>,
    input_tokens: u32,
    output_tokens: u32,
    lengths_basis: String,
    /// Requests per second one replica should carry, and why.
    capacity: Option<(f64, String)>,
    model: String,
    goodput: Vec<GoodputTarget>,
    multi_node: bool,
}

impl<'a> PlanShared<'a> {
    fn new(input: &'a PlanInput<'a>) -> Self {
        let brief = input.brief;
        let alloc = input.allocation;
        let option = alloc.and_then(|a| input.sizing.options.iter().find(|o| o.gpu == a.gpu.model));
        let (input_tokens, output_tokens, lengths_basis) = lengths(brief);
        let capacity = match (option, alloc) {
            (Some(o), Some(a)) => predicted_capacity_rps(brief, o, a, input_tokens, output_tokens),
            _ => None,
        };
        PlanShared {
            input,
            brief,
            alloc,
            devices: alloc.map_or(1, |a| a.count * a.gpu.devices_per_card),
            option,
            input_tokens,
            output_tokens,
            lengths_basis,
            capacity,
            model: model_name(brief),
            goodput: goodput_targets(brief),
            multi_node: alloc.is_some_and(|a| a.count > a.gpu.gpus_per_node.max(1)),
        }
    }

    /// Whether a criterion applies: collectives and links mean nothing on one GPU.
    fn applies(&self, c: &Criterion) -> bool {
        !(self.devices <= 1 && needs_several_gpus(&c.key))
    }
}

/// One stage of the plan: its number and the criteria of the card it tests.
struct StageCtx<'a> {
    shared: &'a PlanShared<'a>,
    stage: u8,
    criteria: Vec<&'a Criterion>,
}

impl StageCtx<'_> {
    /// The stage's criteria that `source` produces, each key once.
    fn feeds(&self, source: Source) -> Vec<String> {
        let mut keys: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| source_of(&c.key) == Some(source))
            .map(|c| c.key.clone())
            .collect();
        keys.dedup();
        keys
    }

    fn step(&self, key: &str, title: String, runner: Runner, kind: &str, feeds: Vec<String>, why: String) -> PlanStep {
        let stage = self.stage;
        PlanStep {
            key: format!("{stage}-{key}"),
            stage,
            title,
            runner,
            kind: kind.to_owned(),
            feeds,
            why,
            timeout_s: 120,
            commands: Vec::new(),
            load: None,
            scrapes: Vec::new(),
            window: None,
            file: None,
            template: None,
            held: None,
            failed_uploads: 0,
        }
    }

    /// The one step `make` builds from the keys `source` feeds; none when the stage asks nothing
    /// of it.
    fn fed(&self, source: Source, make: impl FnOnce(Vec<String>) -> PlanStep) -> Vec<PlanStep> {
        let feeds = self.feeds(source);
        if feeds.is_empty() {
            Vec::new()
        } else {
            vec![make(feeds)]
        }
    }

    /// The common shape: a step of one command, its kind named as its key.
    fn one_command(&self, key: &str, title: &str, feeds: Vec<String>, why: String, run: PlanCommand) -> PlanStep {
        PlanStep {
            commands: vec![run],
            ..self.step(key, title.to_owned(), Runner::Command, key, feeds, why)
        }
    }
}

/// The plan of one trial.
pub fn build(input: &PlanInput<'_>) -> TestPlan {
    let shared = PlanShared::new(input);
    let brief = shared.brief;
    let alloc = shared.alloc;
    let mut stage_numbers: Vec<u8> = input
        .criteria
        .iter()
        .filter(|c| shared.applies(c))
        .map(|c| c.stage)
        .collect();
    stage_numbers.sort();
    stage_numbers.dedup();
    let mut stages = Vec::new();
    let mut has_load = false;
    for stage in stage_numbers {
        let cx = StageCtx {
            shared: &shared,
            stage,
            criteria: input
                .criteria
                .iter()
                .filter(|c| shared.applies(c) && c.stage == stage)
                .collect(),
        };
        has_load |= !cx.feeds(Source::Load).is_empty();
        stages.push(PlanStage {
            stage,
            name: stage_name(stage).to_owned(),
            criteria: cx.criteria.iter().map(|c| c.summary()).collect(),
            steps: STAGE_STEPS.iter().flat_map(|steps| steps(&cx)).collect(),
            not_covered: not_covered(&cx),
        });
    }
    let load = has_load.then(|| load_design(&shared));
    let serve = serve_hint(brief, shared.option, &shared.model, load.as_ref());
    TestPlan {
        format: PLAN_FORMAT,
        brief: PlanBrief {
            id: input.brief_id,
            name: brief.name.clone(),
            model: shared.model.clone(),
            workload_kind: brief.workload_kind.as_str().to_owned(),
        },
        trial: PlanTrial {
            id: input.trial_id,
            name: input.trial_name.to_owned(),
            gpu: alloc.map(|a| a.gpu.model.clone()),
            gpu_count: alloc.map_or(0, |a| a.count),
            gpus_per_node: alloc.map_or(0, |a| a.gpu.gpus_per_node),
            suggested: alloc.is_some_and(|a| a.suggested),
            under_sized: alloc.is_some_and(|a| a.under_sized),
        },
        card_revision: input.card_revision,
        variables: variables(input, shared.multi_node),
        serve,
        load,
        stages,
    }
}

/// Criteria of the stage no tool rentcheck runs produces, with how to send them anyway.
fn not_covered(cx: &StageCtx<'_>) -> Vec<NotCovered> {
    let stage = cx.stage;
    cx.criteria
        .iter()
        .filter(|c| source_of(&c.key).is_none())
        .map(|c| NotCovered {
            key: c.key.clone(),
            how: format!(
                "no tool rentcheck runs produces {}: send it from your own tool as {{\"metrics\": {{\"{}\": …}}}} \
                 with `rentcheck collect --stage {stage} --file metrics=FILE`",
                c.key, c.key
            ),
        })
        .collect()
}

/// The plan's variables: where the agent finds the server, the exporter, its files, its nodes.
fn variables(input: &PlanInput<'_>, multi_node: bool) -> Vec<Variable> {
    let mut variables = vec![
        Variable {
            name: VLLM_URL.into(),
            default: "http://127.0.0.1:8000".into(),
            meaning: "the OpenAI-compatible server under test (vLLM); its /metrics is scraped".into(),
        },
        Variable {
            name: DCGM_EXPORTER_URL.into(),
            default: "http://127.0.0.1:9400".into(),
            meaning: "NVIDIA dcgm-exporter on the node, scraped around each load point (optional)".into(),
        },
        Variable {
            name: OUT.into(),
            default: format!("./rentcheck-plan-{}", short(input.trial_id)),
            meaning: "where load results are written".into(),
        },
        Variable {
            name: PROBES.into(),
            default: "./rentcheck-probes".into(),
            meaning: "where your harness writes the probe and checkpoint files".into(),
        },
        Variable {
            name: VLLM_LOG.into(),
            default: "./vllm-server.log".into(),
            meaning: "the vLLM server's start-up log".into(),
        },
    ];
    if multi_node {
        variables.push(Variable {
            name: HOSTFILE.into(),
            default: "./hostfile".into(),
            meaning: "the nodes of the trial, one per line, for mpirun".into(),
        });
    }
    variables
}

/// The first eight hex digits of an id, for names people read.
pub fn short(id: TrialId) -> String {
    id.as_uuid().simple().to_string()[..8].to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::{
        acceptance::defaults::default_card_for,
        briefs::model::{validate, BriefInput},
    };

    fn brief(extra: serde_json::Value) -> BriefFields {
        let mut v = json!({
            "name": "chat", "owner": "o", "model_name": "m", "model_revision": "abc123",
            "params_b": 8, "precision": "bf16", "context_length": 8192, "concurrency": 16,
            "num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "num_attention_heads": 32,
            "data_boundary": "shared-ok", "cost_unit": "request", "currency": "USD",
            "allocation_boundary": "vm", "workload_kind": "realtime-inference",
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        let serde_json::Value::Object(map) = v else {
            unreachable!()
        };
        validate(&BriefInput::Json(&map)).unwrap()
    }

    fn plan_of(b: &BriefFields, gpu: &str, count: i32) -> TestPlan {
        let sizing = b.sizing();
        let alloc = Allocation::resolve(Some(gpu), Some(count), &sizing).unwrap();
        let criteria = default_card_for(b, Some((alloc.gpu, alloc.count)));
        build(&PlanInput {
            brief_id: BriefId::from(Uuid::nil()),
            brief: b,
            sizing: &sizing,
            trial_id: TrialId::from(Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)),
            trial_name: "Trial 1",
            allocation: Some(&alloc),
            criteria: &criteria,
            card_revision: 0,
        })
    }

    fn keys(plan: &TestPlan, stage: u8) -> Vec<&str> {
        plan.stages
            .iter()
            .filter(|s| s.stage == stage)
            .flat_map(|s| s.steps.iter().map(|x| x.key.as_str()))
            .collect()
    }

    fn step<'a>(plan: &'a TestPlan, key: &str) -> &'a PlanStep {
        plan.steps()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("no step {key}"))
    }

    /// The value after `flag` in `argv`.
    fn flag<'a>(argv: &'a [String], flag: &str) -> &'a str {
        let i = argv
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("no {flag} in {argv:?}"));
        &argv[i + 1]
    }

    #[test]
    fn a_one_gpu_trial_runs_no_collectives_and_sweeps_around_its_capacity() {
        let b = brief(json!({
            "targets": { "ttft_p95_ms": 300, "itl_p95_ms": 40, "e2e_p95_ms": 6000 },
            "expected_peak_rps": 3, "max_cost_per_job": "0.002",
            "trial_gpu": "H100 SXM", "trial_gpu_count": 1
        }));
        let plan = plan_of(&b, "H100 SXM", 1);
        assert_eq!(plan.trial.gpu_count, 1);
        assert_eq!(
            keys(&plan, 1),
            ["1-nvidia-smi-list", "1-nvidia-smi-query", "1-dcgm-diag"],
            "one GPU: no topology, no nccl-tests"
        );
        assert_eq!(
            step(&plan, "1-dcgm-diag").commands[0].argv,
            ["dcgmi", "diag", "-r", "2", "-j"]
        );
        assert_eq!(step(&plan, "1-nvidia-smi-query").commands[0].shell, "nvidia-smi -q -x");

        // Lengths from the brief: (6000 − 300) ÷ 40 + 1 = 143 output tokens, the rest of the 8192 context.
        let load = plan.load.as_ref().unwrap();
        assert_eq!((load.input_tokens, load.output_tokens), (8192 - 143 - 81, 143));
        let capacity = load.capacity_rps.unwrap();
        assert!(capacity > 0.0);
        let rates = &load.rates_rps;
        assert!(rates.windows(2).all(|w| w[0] < w[1]), "ascending: {rates:?}");
        assert!(
            rates[0] <= 0.15 * capacity && *rates.last().unwrap() >= capacity,
            "brackets {capacity}: {rates:?}"
        );
        if 3.0 <= PEAK_CEILING_SHARE * capacity {
            assert!(rates.contains(&3.0), "the brief's peak is a point: {rates:?}");
        }
        let loads: Vec<&PlanStep> = plan.steps().filter(|s| s.runner == Runner::Load).collect();
        assert_eq!(loads.len(), rates.len());
        for s in &loads {
            assert_eq!(s.stage, 3);
            let vllm = &s.commands[0];
            assert_eq!(
                (vllm.tool.as_str(), &vllm.argv[..3]),
                ("vllm", &["vllm", "bench", "serve"].map(String::from)[..])
            );
            let a = &vllm.argv;
            let p = s.load.as_ref().unwrap();
            assert_eq!(flag(a, "--random-input-len"), "7968");
            assert_eq!(flag(a, "--random-output-len"), "143");
            assert_eq!(flag(a, "--request-rate"), fmt_num(p.rate_rps));
            assert_eq!(flag(a, "--num-prompts"), p.num_prompts.to_string());
            assert_eq!(flag(a, "--percentile-metrics"), "ttft,tpot,itl,e2el");
            assert_eq!(flag(a, "--metric-percentiles"), "50,95,99");
            assert!(a.contains(&"--save-detailed".to_owned()) && a.contains(&"--save-result".to_owned()));
            let g = a.iter().position(|x| x == "--goodput").unwrap();
            assert_eq!(&a[g + 1..g + 4], ["ttft:300", "tpot:40", "e2el:6000"]);
            assert_eq!(
                s.commands.iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(),
                ["vllm", "guidellm", "rentcheck"]
            );
            assert!(s.scrapes.iter().any(|x| x.kind == "vllm-metrics" && x.required));
            assert!(s.scrapes.iter().any(|x| x.kind == "dcgm-exporter" && !x.required));
            assert!(s.window.as_deref().unwrap().ends_with(&s.key));
            assert!(s.feeds.contains(&"serving.ttft_p95_ms".to_owned()));
            assert!(s.feeds.contains(&"serving.kv_cache_usage_max_pct".to_owned()));
        }
        let serve = plan.serve.as_ref().unwrap();
        assert!(serve.command.contains("--max-model-len 8192") && serve.command.contains("--tensor-parallel-size 1"));

        let probes = step(&plan, "2-probes");
        assert_eq!(probes.runner, Runner::File);
        assert_eq!(probes.file.as_deref(), Some("${PROBES}/2-probes.json"));
        assert_eq!(
            probes.template.as_ref().unwrap()["checks"]["artifact_loaded"],
            json!(true)
        );
        assert!(keys(&plan, 4).contains(&"4-checkpoint-restore"));
        assert_eq!(step(&plan, "5-ledger").runner, Runner::Manual);
        // Every curl people have: `--fail-with-body` came with 7.76, Ubuntu 20.04 has 7.68.
        let ledger = &step(&plan, "5-ledger").commands[0].argv;
        assert!(
            ledger.contains(&"--fail".to_owned()) && !ledger.contains(&"--fail-with-body".to_owned()),
            "{ledger:?}"
        );

        // Every criterion that applies is fed by a step of its stage.
        for stage in &plan.stages {
            assert!(stage.not_covered.is_empty(), "{:?}", stage.not_covered);
            let fed: Vec<&String> = stage.steps.iter().flat_map(|s| s.feeds.iter()).collect();
            for c in &stage.criteria {
                let key = c.split_whitespace().next().unwrap();
                assert!(
                    fed.iter().any(|f| f.as_str() == key),
                    "stage {}: {key} fed by no step",
                    stage.stage
                );
            }
            assert!(stage.steps.iter().all(|s| !s.why.is_empty() && !s.feeds.is_empty()));
        }
        let unique: std::collections::BTreeSet<&str> = plan.steps().map(|s| s.key.as_str()).collect();
        assert_eq!(unique.len(), plan.steps().count(), "step keys are unique");
    }

    #[test]
    fn an_eight_gpu_trial_checks_the_links_and_all_reduce_over_eight_gpus() {
        let b = brief(json!({
            "params_b": 70, "num_layers": 80, "num_attention_heads": 64, "context_length": 4096,
            "targets": { "ttft_p95_ms": 500 },
            "trial_gpu": "H100 SXM", "trial_gpu_count": 8
        }));
        let plan = plan_of(&b, "H100 SXM", 8);
        assert_eq!(
            keys(&plan, 1),
            [
                "1-nvidia-smi-list",
                "1-nvidia-smi-topo",
                "1-nvidia-smi-query",
                "1-dcgm-diag",
                "1-nccl-all-reduce"
            ]
        );
        let nccl = step(&plan, "1-nccl-all-reduce");
        assert_eq!(
            nccl.commands[0].argv,
            ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"],
            "one process drives the node's eight GPUs"
        );
        assert_eq!(nccl.feeds, ["nccl.busbw_peak_gbps", "nccl.wrong"]);
        assert_eq!(step(&plan, "1-nvidia-smi-topo").feeds, ["topo.worst_link"]);
        // No e2e target: the default output length, the rest of the context as input.
        let load = plan.load.as_ref().unwrap();
        assert_eq!((load.input_tokens, load.output_tokens), (4096 - 256 - 40, 256));
        assert_eq!(
            load.goodput,
            [GoodputTarget {
                metric: "ttft".into(),
                ms: 500.0
            }]
        );
        let tp = plan.serve.as_ref().unwrap();
        assert!(tp.command.contains("--tensor-parallel-size"), "{}", tp.command);

        // DCGM runs only level 1 on a GeForce card: level 2 would skip its tests, and fail.
        let geforce = plan_of(&b, "RTX 4090", 1);
        let diag = step(&geforce, "1-dcgm-diag");
        assert_eq!(diag.commands[0].argv, ["dcgmi", "diag", "-r", "1", "-j"]);
        assert!(diag.why.contains("the only level DCGM runs on GeForce"), "{}", diag.why);
        assert_eq!(step(&plan_of(&b, "L4", 1), "1-dcgm-diag").commands[0].argv[3], "2");
        // DCGM's SKU list documents the workstation cards for every level.
        assert_eq!(
            step(&plan_of(&b, "RTX A6000", 1), "1-dcgm-diag").commands[0].argv[3],
            "2"
        );

        // Two nodes of eight: one rank per GPU under a launcher, and NCCL names its NICs.
        let wide = plan_of(&b, "H100 SXM", 16);
        let nccl = step(&wide, "1-nccl-all-reduce");
        let mpi = &nccl.commands[0];
        assert_eq!(mpi.tool, "mpirun");
        assert_eq!(flag(&mpi.argv, "-np"), "16");
        assert_eq!(flag(&mpi.argv, "-N"), "8");
        assert_eq!(flag(&mpi.argv, "-g"), "1");
        assert!(mpi.argv.contains(&"NCCL_DEBUG=INFO".to_owned()));
        // As root (rented machines are), with this shell's paths on the other nodes.
        assert!(mpi.argv.contains(&"--allow-run-as-root".to_owned()), "{:?}", mpi.argv);
        assert_eq!(flag(&mpi.argv, "-x"), "PATH");
        assert!(mpi.shell.contains("-x LD_LIBRARY_PATH"), "{}", mpi.shell);
        assert_eq!(nccl.commands[1].tool, "srun");
        // Each task sees its node's GPUs: with one a task, local rank 1 has no second device.
        assert!(
            nccl.commands[1].argv.contains(&"--gpus-per-node=8".to_owned()),
            "{:?}",
            nccl.commands[1].argv
        );
        assert!(wide.variables.iter().any(|v| v.name == HOSTFILE));
    }

    #[test]
    fn every_plan_the_builder_writes_is_one_collect_agrees_to_run() {
        let b = brief(json!({
            "targets": { "ttft_p95_ms": 300, "itl_p95_ms": 40, "e2e_p95_ms": 6000 },
            "expected_peak_rps": 3, "max_cost_per_job": "0.002",
            "trial_gpu": "H100 SXM", "trial_gpu_count": 1,
            "persist": ["weights", "checkpoints"], "restore_plan": "restore"
        }));
        let mut runners = std::collections::BTreeSet::new();
        for (gpu, count) in [
            ("H100 SXM", 1),
            ("H100 SXM", 8),
            ("H100 SXM", 16),
            ("L4", 4),
            ("A100 80GB SXM", 2),
        ] {
            let plan = plan_of(&b, gpu, count);
            if let Err(refused) = crate::collect::allow::check_plan(&plan) {
                panic!("{count} × {gpu}: the agent refuses its own server's plan: {refused}");
            }
            for s in plan.steps() {
                runners.insert(s.runner.as_str().to_owned());
                runners.extend(s.commands.iter().map(|c| c.tool.clone()));
            }
        }
        for needed in &[
            "command",
            "load",
            "file",
            "nvidia-smi",
            "dcgmi",
            "all_reduce_perf",
            "mpirun",
            "srun",
            "vllm",
            "guidellm",
            "rentcheck",
        ] {
            assert!(
                runners.contains(*needed),
                "the plans checked include {needed}: {runners:?}"
            );
        }
    }
}
