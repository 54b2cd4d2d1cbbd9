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

use crate::{
    acceptance::{
        defaults::needs_several_gpus,
        model::{stage_name, Criterion},
    },
    briefs::model::BriefFields,
    collect::plan::{
        shell_line, shell_line_with, GoodputTarget, LoadDesign, LoadPoint, NotCovered, PlanBrief, PlanCommand,
        PlanStage, PlanStep, PlanTrial, Runner, Scrape, ServeHint, TestPlan, Variable, BUILT_IN_TOOL, PLAN_FORMAT,
    },
    ids::{BriefId, TrialId},
    sizing::{Precision, Sizing, SizingOption, WorkloadKind},
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

/// Seconds each load point aims to last: long enough for stable p95s, short enough for a sweep of
/// six to eight points to fit in a quarter of an hour.
pub const POINT_SECONDS: f64 = 120.0;
/// Requests per load point, at least and at most.
pub const MIN_PROMPTS: u32 = 20;
pub const MAX_PROMPTS: u32 = 3000;
/// Shares of the predicted capacity the sweep offers: from well below (the latency floor) to past
/// it (where the server saturates), since real servers reach 30–70 % of the ceiling.
pub const CAPACITY_SHARES: [f64; 6] = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5];
/// The brief's peak joins the sweep up to this multiple of one replica's capacity; above it the
/// brief needs several replicas and the review sizes them from the capacity at the SLO.
pub const PEAK_CEILING_SHARE: f64 = 2.0;
/// Output tokens when the brief's targets do not imply a length.
pub const DEFAULT_OUTPUT_TOKENS: u32 = 256;

/// The `${NAME}`s the commands use.
pub const VLLM_URL: &str = "VLLM_URL";
pub const DCGM_EXPORTER_URL: &str = "DCGM_EXPORTER_URL";
pub const OUT: &str = "OUT";
pub const PROBES: &str = "PROBES";
pub const VLLM_LOG: &str = "VLLM_LOG";
pub const HOSTFILE: &str = "HOSTFILE";

/// Where a criterion's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    SmiList,
    SmiTopo,
    SmiQuery,
    DcgmDiscovery,
    DcgmDiag,
    Nccl,
    DcgmExporter,
    Load,
    VllmLog,
    Probe,
    Checkpoint,
    Ledger,
    Manifest,
}

fn source_of(key: &str) -> Option<Source> {
    let s = match key {
        "gpu.count" | "gpu.models" | "gpu.uuids" | "gpu.mig_count" => Source::SmiList,
        "gpu.memory_total_mib"
        | "gpu.memory_used_mib_max"
        | "gpu.driver_version"
        | "gpu.cuda_version"
        | "gpu.ecc_errors_uncorrected" => Source::SmiQuery,
        "dcgm.gpu_count" => Source::DcgmDiscovery,
        "serving.kv_cache_tokens" | "serving.max_concurrency" | "serving.gpu_memory_utilization" => Source::VllmLog,
        k if k.starts_with("gpu.") => Source::DcgmExporter,
        k if k.starts_with("topo.") => Source::SmiTopo,
        k if k.starts_with("dcgm.diag.") => Source::DcgmDiag,
        k if k.starts_with("nccl.") => Source::Nccl,
        k if k.starts_with("serving.") => Source::Load,
        k if k.starts_with("probe.") => Source::Probe,
        k if k.starts_with("checkpoint.") => Source::Checkpoint,
        k if k.starts_with("ledger.") => Source::Ledger,
        k if k.starts_with("manifest.") => Source::Manifest,
        _ => return None,
    };
    Some(s)
}

/// `dcgmi diag` level for a stage: the smoke and functional stages run level 2 (medium: the
/// deployment checks plus PCIe, GPU memory and a short stress, about two minutes), the load and
/// failure stages level 3 (long: adds the targeted stress, power and memory-bandwidth tests, about
/// half an hour), the review level 1 (software only). Level 1 alone checks no hardware.
pub fn diag_level(stage: u8) -> u8 {
    match stage {
        1 | 2 => 2,
        3 | 4 => 3,
        _ => 1,
    }
}

fn diag_seconds(level: u8) -> u64 {
    match level {
        1 => 300,
        2 => 1200,
        3 => 5400,
        _ => 4 * 3600,
    }
}

/// The largest all-reduce size: a power of two at most a sixth of the card's memory (nccl-tests
/// holds the send, receive and check buffers), between 256 MiB and 8 GiB — large enough for the
/// bus bandwidth to reach its peak.
pub fn nccl_max_bytes(memory_gb: f64) -> &'static str {
    let budget = memory_gb / 6.0;
    if budget >= 8.0 {
        "8G"
    } else if budget >= 4.0 {
        "4G"
    } else if budget >= 2.0 {
        "2G"
    } else if budget >= 1.0 {
        "1G"
    } else if budget >= 0.5 {
        "512M"
    } else {
        "256M"
    }
}

/// Input and output tokens of each request, and why. Output: what the brief's targets imply — a
/// request that takes TTFT plus (n − 1) inter-token gaps ends at the end-to-end target, so
/// n = (e2e − TTFT) ÷ ITL + 1 — else [`DEFAULT_OUTPUT_TOKENS`]; at most half the context. Input:
/// the rest of the context, less a margin for tokenizer drift: the sizing holds `concurrency`
/// sequences at the full context, and a shorter prompt would test a lighter workload than the one
/// rented for.
pub fn lengths(brief: &BriefFields) -> (u32, u32, String) {
    let context = u32::try_from(brief.context_length.max(2)).unwrap_or(u32::MAX);
    let t = &brief.targets;
    let (mut output, mut basis) = match (t.e2e_p95_ms, t.itl_p95_ms) {
        (Some(e2e), Some(itl)) if itl > 0.0 && e2e > t.ttft_p95_ms.unwrap_or(0.0) => {
            let n = ((e2e - t.ttft_p95_ms.unwrap_or(0.0)) / itl).floor() + 1.0;
            let n = n.clamp(16.0, 4096.0) as u32;
            (
                n,
                format!(
                    "{n} output tokens: what the brief's targets imply (end-to-end {} ms − TTFT {} ms) ÷ ITL {} ms + 1",
                    fmt_num(e2e),
                    fmt_num(t.ttft_p95_ms.unwrap_or(0.0)),
                    fmt_num(itl)
                ),
            )
        }
        _ => (
            DEFAULT_OUTPUT_TOKENS,
            format!(
                "{DEFAULT_OUTPUT_TOKENS} output tokens: the brief's targets do not imply a length (that needs an end-to-end and an inter-token target)"
            ),
        ),
    };
    if output > context / 2 {
        output = (context / 2).max(1);
        basis = format!("{output} output tokens: half the brief's context of {context}");
    }
    let margin = (context / 100).max(16);
    let input = context.saturating_sub(output).saturating_sub(margin).max(1);
    basis.push_str(&format!(
        "; {input} input tokens: the rest of the brief's {context}-token context (less {margin} for tokenizer drift), \
         because the sizing holds {} sequences at the full context",
        brief.concurrency
    ));
    (input, output, basis)
}

/// The requests per second this allocation can serve, predicted from the sizing: the decode
/// ceiling (the sizing's aggregate decode tokens/s at full memory bandwidth, scaled to the trial's
/// GPU count) shared with the prefill ceiling (2 × active parameters × input tokens of compute per
/// request at the GPUs' dense peak): 1 ÷ C = output ÷ decode tokens/s + prefill FLOPs ÷ peak FLOP/s.
/// A ceiling: real servers reach roughly half of it.
pub fn predicted_capacity_rps(
    brief: &BriefFields,
    option: &SizingOption,
    alloc: &Allocation,
    input: u32,
    output: u32,
) -> Option<(f64, String)> {
    if option.decode_tokens_per_s_max <= 0.0 || option.count == 0 {
        return None;
    }
    let scale = f64::from(alloc.count) / f64::from(option.count);
    let decode = option.decode_tokens_per_s_max * scale;
    let mut seconds = f64::from(output) / decode;
    let mut basis = format!(
        "{} × {}: decode ceiling {} tokens/s (the sizing's {} tokens/s for {} GPUs{}) ÷ {output} output tokens",
        alloc.count,
        alloc.gpu.model,
        crate::money::number(round_sig(decode, 3)),
        crate::money::number(option.decode_tokens_per_s_max),
        option.count,
        if (scale - 1.0).abs() > 1e-9 {
            ", scaled to this trial's GPUs"
        } else {
            ""
        }
    );
    let tflops = match brief.precision {
        Precision::Fp8 | Precision::Int8 => alloc.gpu.fp8_dense_tflops.or(alloc.gpu.fp16_bf16_dense_tflops),
        _ => alloc.gpu.fp16_bf16_dense_tflops,
    };
    let active_b = brief
        .architecture
        .active_params_b
        .or(brief.catalog_entry().map(|m| m.active_params_b))
        .unwrap_or(brief.params_b);
    if let Some(tf) = tflops.filter(|t| *t > 0.0) {
        let flops = 2.0 * active_b * 1e9 * f64::from(input);
        let peak = tf * 1e12 * f64::from(alloc.count);
        seconds += flops / peak;
        basis.push_str(&format!(
            ", sharing the GPUs with prefill (2 × {} B active parameters × {input} input tokens at {} dense TFLOPS × {})",
            fmt_num(active_b),
            fmt_num(tf),
            alloc.count
        ));
    }
    let c = 1.0 / seconds;
    (c.is_finite() && c > 0.0).then(|| {
        (
            c,
            format!(
                "{basis}: about {} req/s at most; real servers reach roughly half",
                fmt_num(round_sig(c, 2))
            ),
        )
    })
}

/// `x` to `digits` significant digits.
pub fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// A number without a spurious `.0`, as flags and labels want it.
pub fn fmt_num(x: f64) -> String {
    let r = (x * 1e6).round() / 1e6;
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// The offered rates of the sweep, ascending, each with why it is there.
pub fn sweep_rates(capacity: Option<f64>, peak: Option<f64>, target_rps: Option<f64>) -> Vec<(f64, String)> {
    let mut rates: Vec<(f64, String, bool)> = Vec::new();
    match (capacity, peak) {
        (Some(c), _) => {
            for share in CAPACITY_SHARES {
                rates.push((
                    share * c,
                    format!(
                        "{} % of the predicted capacity ({} req/s)",
                        fmt_num(share * 100.0),
                        fmt_num(round_sig(c, 2))
                    ),
                    false,
                ));
            }
        }
        (None, Some(p)) => {
            for share in [0.25, 0.5, 1.0, 1.5, 2.0] {
                rates.push((
                    share * p,
                    format!(
                        "{} % of the brief's peak ({} req/s): the sizing predicts no capacity",
                        fmt_num(share * 100.0),
                        fmt_num(p)
                    ),
                    false,
                ));
            }
        }
        (None, None) => {
            for r in [0.5, 1.0, 2.0, 4.0, 8.0] {
                rates.push((
                    r,
                    "a default step: neither the sizing nor the brief gives a rate".into(),
                    false,
                ));
            }
        }
    }
    if let Some(p) = peak.filter(|p| *p > 0.0) {
        match capacity {
            Some(c) if p > PEAK_CEILING_SHARE * c => {}
            _ => rates.push((p, "the brief's expected peak".into(), true)),
        }
    }
    if let Some(t) = target_rps.filter(|t| *t > 0.0) {
        rates.push((t, "the brief's request-throughput target".into(), true));
    }
    for r in &mut rates {
        r.0 = round_sig(r.0, 2).max(0.01);
    }
    // The brief's own rates win over a nearby share (within 10 %).
    rates.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.total_cmp(&b.0)));
    let mut kept: Vec<(f64, String)> = Vec::new();
    for (rate, why, _) in rates {
        match kept.iter_mut().find(|(k, _)| (rate - *k).abs() <= 0.1 * k.max(rate)) {
            Some(existing) if existing.0 == rate && !existing.1.contains(&why) => {
                existing.1.push_str(&format!("; {why}"));
            }
            Some(_) => {}
            None => kept.push((rate, why)),
        }
    }
    kept.sort_by(|a, b| a.0.total_cmp(&b.0));
    kept
}

/// Requests at one rate: [`POINT_SECONDS`] of arrivals, within [`MIN_PROMPTS`]..[`MAX_PROMPTS`].
pub fn prompts_at(rate: f64) -> u32 {
    ((rate * POINT_SECONDS).ceil() as u32).clamp(MIN_PROMPTS, MAX_PROMPTS)
}

fn model_name(brief: &BriefFields) -> String {
    brief.catalog_model.clone().unwrap_or_else(|| brief.model_name.clone())
}

fn command(tool: &str, argv: &[&str], hint: &str) -> PlanCommand {
    let argv: Vec<String> = argv.iter().map(|a| (*a).to_owned()).collect();
    PlanCommand {
        tool: tool.to_owned(),
        shell: shell_line(&[], &argv),
        argv,
        env: Vec::new(),
        output_file: None,
        install_hint: hint.to_owned(),
    }
}

const NVIDIA_SMI_HINT: &str = "nvidia-smi comes with the NVIDIA driver; in a container, request the GPUs and run under the NVIDIA Container Toolkit";
const DCGMI_HINT: &str = "install NVIDIA DCGM (the datacenter-gpu-manager-4-cuda12 package from NVIDIA's CUDA repository, or datacenter-gpu-manager for DCGM 3) and start nv-hostengine";
const NCCL_HINT: &str = "build nccl-tests (git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests) and put nccl-tests/build on PATH";
const MPI_HINT: &str =
    "install Open MPI (apt install openmpi-bin), build nccl-tests with MPI=1, and list the nodes in ${HOSTFILE}";
const SRUN_HINT: &str = "run inside a Slurm allocation of the trial's nodes";
const VLLM_HINT: &str = "pip install vllm (it brings `vllm bench serve`)";
const GUIDELLM_HINT: &str = "pip install guidellm";
const CURL_HINT: &str = "install curl (apt install curl)";

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

/// The steps of one stage, from one tool or source each (none when the stage asks nothing of it).
type StageSteps = fn(&StageCtx<'_>) -> Vec<PlanStep>;

/// The steps in the order the agent runs them within a stage.
const STAGE_STEPS: [StageSteps; 13] = [
    smi_list_step,
    smi_topo_step,
    smi_query_step,
    dcgm_discovery_step,
    dcgm_diag_step,
    nccl_step,
    dcgm_exporter_step,
    load_steps,
    vllm_log_step,
    probes_step,
    checkpoint_step,
    ledger_step,
    manifest_step,
];

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

/// The rates the load sweep offers, from the predicted capacity, the brief's peak and target.
fn sweep_of(shared: &PlanShared<'_>) -> Vec<(f64, String)> {
    let brief = shared.brief;
    sweep_rates(
        shared.capacity.as_ref().map(|c| c.0),
        brief.expected_peak_rps,
        brief.targets.request_throughput_rps,
    )
}

/// One load point per rate of the sweep; vLLM and dcgm-exporter are scraped around each.
fn load_steps(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let mut f = cx.feeds(Source::Load);
    if f.is_empty() {
        return Vec::new();
    }
    f.extend(cx.feeds(Source::DcgmExporter));
    let shared = cx.shared;
    let (stage, input_tokens, output_tokens) = (cx.stage, shared.input_tokens, shared.output_tokens);
    let goodput_args: Vec<String> = shared
        .goodput
        .iter()
        .map(|g| format!("{}:{}", g.metric, fmt_num(g.ms)))
        .collect();
    let mut steps = Vec::new();
    for (rate, basis) in &sweep_of(shared) {
        let rate_s = fmt_num(*rate);
        let key = format!("load-{rate_s}rps");
        let step_key = format!("{stage}-{key}");
        let n = prompts_at(*rate);
        let mut s = cx.step(
            &key,
            format!("Load point: {rate_s} requests/s"),
            Runner::Load,
            "bench-serving",
            f.clone(),
            format!(
                "Offered {rate_s} req/s ({basis}), {n} requests of {input_tokens} input and {output_tokens} output tokens, Poisson arrivals. \
                 vLLM and dcgm-exporter are scraped before and after under one window id, so KV-cache use, preemptions and GPU figures are those of this point alone."
            ),
        );
        s.load = Some(LoadPoint {
            rate_rps: *rate,
            num_prompts: n,
            input_tokens,
            output_tokens,
            basis: basis.clone(),
        });
        s.scrapes = vec![
            Scrape {
                url: "${VLLM_URL}/metrics".into(),
                kind: "vllm-metrics".into(),
                required: true,
            },
            Scrape {
                url: "${DCGM_EXPORTER_URL}/metrics".into(),
                kind: "dcgm-exporter".into(),
                required: false,
            },
        ];
        s.window = Some(format!("plan-{}-{step_key}", shared.input.trial_id));
        // Arrivals take n ÷ rate seconds; the last requests then finish, at worst slowly.
        s.timeout_s = ((f64::from(n) / rate * 2.0) as u64 + 600).min(4 * 3600);
        s.commands = load_commands(
            &shared.model,
            &step_key,
            *rate,
            n,
            input_tokens,
            output_tokens,
            &goodput_args,
        );
        steps.push(s);
    }
    steps
}

/// How the load sweep was designed, for the plan's reader.
fn load_design(shared: &PlanShared<'_>) -> LoadDesign {
    let capacity = &shared.capacity;
    LoadDesign {
        input_tokens: shared.input_tokens,
        output_tokens: shared.output_tokens,
        lengths_basis: shared.lengths_basis.clone(),
        capacity_rps: capacity.as_ref().map(|c| round_sig(c.0, 3)),
        capacity_basis: capacity.as_ref().map_or_else(
            || match shared.alloc {
                Some(_) => "the sizing predicts no decode throughput for this allocation".to_owned(),
                None => "the sizing has no option for this trial".to_owned(),
            },
            |c| c.1.clone(),
        ),
        rates_rps: sweep_of(shared).iter().map(|r| r.0).collect(),
        goodput: shared.goodput.clone(),
        why: "The sweep brackets the brief's need: from well below the predicted capacity (the latency floor) to past it \
              (where the server saturates), with the brief's own peak and throughput target as points of their own. \
              The review's operating point is the highest throughput that still meets the card."
            .into(),
    }
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

/// `nvidia-smi -L`: the GPUs the machine shows.
fn smi_list_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let alloc = cx.shared.alloc;
    cx.fed(Source::SmiList, |f| {
        cx.one_command(
            "nvidia-smi-list",
            "List the GPUs",
            f,
            match alloc {
                Some(a) => format!(
                    "The machine must show the {} GPU devices rented ({}); `nvidia-smi -L` lists each with its model and UUID (MIG slices too).",
                    a.count * a.gpu.devices_per_card,
                    a.label()
                ),
                None => "`nvidia-smi -L` lists each GPU with its model and UUID.".into(),
            },
            command("nvidia-smi", &["nvidia-smi", "-L"], NVIDIA_SMI_HINT),
        )
    })
}

/// `nvidia-smi topo -m`: how the GPUs are linked.
fn smi_topo_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let devices = cx.shared.devices;
    cx.fed(Source::SmiTopo, |f| {
        cx.one_command(
            "nvidia-smi-topo",
            "Map how the GPUs are linked",
            f,
            format!(
                "Collectives across {devices} GPUs are only as fast as the slowest link between two of them; the topology matrix names each pair's link (NVLink, PCIe switch, CPU socket)."
            ),
            command("nvidia-smi", &["nvidia-smi", "topo", "-m"], NVIDIA_SMI_HINT),
        )
    })
}

/// `nvidia-smi -q -x`: memory, driver and ECC counters.
fn smi_query_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let stage = cx.stage;
    cx.fed(Source::SmiQuery, |f| {
        let during = if stage == 3 {
            " Run it while a representative step runs: the memory figure is the peak it sees."
        } else {
            ""
        };
        cx.one_command(
            "nvidia-smi-query",
            "Read memory, driver and ECC counters",
            f,
            format!("`nvidia-smi -q -x` gives each GPU's memory, driver and CUDA versions and ECC error counters as XML.{during}"),
            command("nvidia-smi", &["nvidia-smi", "-q", "-x"], NVIDIA_SMI_HINT),
        )
    })
}

/// `dcgmi discovery --list`: the GPUs DCGM manages.
fn dcgm_discovery_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    cx.fed(Source::DcgmDiscovery, |f| {
        cx.one_command(
            "dcgm-discovery",
            "Ask DCGM which GPUs it manages",
            f,
            "DCGM's own count of the GPUs it can manage and test.".into(),
            command("dcgmi", &["dcgmi", "discovery", "--list"], DCGMI_HINT),
        )
    })
}

/// `dcgmi diag` at the stage's level.
fn dcgm_diag_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let stage = cx.stage;
    cx.fed(Source::DcgmDiag, |f| {
        let level = diag_level(stage);
        let what = match level {
            1 => "level 1 (quick: the software deployment only)",
            2 => "level 2 (medium, about two minutes: the deployment checks plus PCIe, GPU memory and a short stress of every GPU)",
            3 => "level 3 (long, about half an hour: adds the targeted stress, power and memory-bandwidth tests)",
            _ => "level 4 (extra long)",
        };
        let mut s = cx.step(
            "dcgm-diag",
            format!("Run DCGM diagnostics, level {level}"),
            Runner::Command,
            "dcgm-diag",
            f,
            format!(
                "Stage {stage} runs {what}; every test must run and pass, a skip is not a pass. Run it before vLLM takes the GPUs: the diagnostics need them to themselves."
            ),
        );
        let level = level.to_string();
        s.commands = vec![command("dcgmi", &["dcgmi", "diag", "-r", &level, "-j"], DCGMI_HINT)];
        s.timeout_s = diag_seconds(diag_level(stage));
        s
    })
}

/// nccl-tests' all-reduce across the allocation (mpirun or srun across nodes).
fn nccl_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let devices = cx.shared.devices;
    let multi_node = cx.shared.multi_node;
    let Some(a) = cx.shared.alloc else {
        return Vec::new();
    };
    cx.fed(Source::Nccl, |f| {
        let max = nccl_max_bytes(a.gpu.memory_gb);
        let per_node = a.gpu.gpus_per_node.max(1).min(a.count) * a.gpu.devices_per_card;
        let nodes = a.count.div_ceil(a.gpu.gpus_per_node.max(1));
        let mut s = cx.step(
            "nccl-all-reduce",
            format!("Measure all-reduce bandwidth across the {devices} GPUs"),
            Runner::Command,
            "nccl-tests",
            f,
            format!(
                "nccl-tests' all_reduce_perf from 8 B to {max} (doubling) checks every result (`#wrong`) and reports the bus bandwidth, which the card compares with what {} should reach{}.",
                a.label(),
                if multi_node {
                    format!(" across {nodes} nodes; NCCL_DEBUG=INFO names the NICs so the expected figure uses them")
                } else {
                    format!(": one process drives all {devices} GPUs (`-g {devices}`)")
                }
            ),
        );
        if multi_node {
            s.commands = nccl_across_nodes(devices, per_node, nodes, max);
            s.timeout_s = 3600;
        } else {
            let g = devices.to_string();
            s.commands = vec![command("all_reduce_perf", &all_reduce_perf(max, &g), NCCL_HINT)];
            s.timeout_s = 1800;
        }
        s
    })
}

/// One dcgm-exporter scrape, when no load point scrapes it already.
fn dcgm_exporter_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    if !cx.feeds(Source::Load).is_empty() {
        return Vec::new();
    }
    cx.fed(Source::DcgmExporter, |f| {
        let mut s = cx.step(
            "dcgm-exporter",
            "Scrape dcgm-exporter".into(),
            Runner::Command,
            "dcgm-exporter",
            f,
            "NVIDIA's dcgm-exporter reports each GPU's utilisation, power, temperature and XID errors; one scrape gives them as of now.".into(),
        );
        s.commands = vec![command(
            "curl",
            &["curl", "-sS", "--fail", "${DCGM_EXPORTER_URL}/metrics"],
            CURL_HINT,
        )];
        s
    })
}

/// The vLLM start-up log, sent as a file.
fn vllm_log_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    cx.fed(Source::VllmLog, |f| {
        let mut s = cx.step(
            "vllm-log",
            "Send the vLLM start-up log".into(),
            Runner::File,
            "vllm-log",
            f,
            "vLLM logs the KV-cache size it allocated and the concurrency it can hold at start; the review compares them with the sizing's prediction.".into(),
        );
        s.file = Some("${VLLM_LOG}".into());
        s
    })
}

/// The stage's probes, one file the harness writes.
fn probes_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let mut steps = Vec::new();
    let stage = cx.stage;
    let criteria = &cx.criteria;
    let probes: Vec<&&Criterion> = criteria
        .iter()
        .filter(|c| source_of(&c.key) == Some(Source::Probe))
        .collect();
    if !probes.is_empty() {
        let mut checks = serde_json::Map::new();
        for c in &probes {
            let name = c.key.trim_start_matches("probe.");
            checks.insert(
                name.to_owned(),
                serde_json::to_value(&c.threshold).unwrap_or(serde_json::Value::Null),
            );
        }
        let names: Vec<String> = probes.iter().map(|c| c.key.clone()).collect();
        let mut s = cx.step(
            "probes",
            format!("Probes of stage {stage}: {}", checks.keys().cloned().collect::<Vec<_>>().join(", ")),
            Runner::File,
            "probe",
            names,
            format!(
                "Only your harness knows whether {}: it writes what it found as {{\"checks\": {{…}}}} to this file (the template shows the values that pass), and collect sends it.",
                probes
                    .iter()
                    .filter_map(|c| c.why.as_deref())
                    .map(|w| w.trim_end_matches('.').to_lowercase())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        );
        s.file = Some(format!("${{PROBES}}/{stage}-probes.json"));
        s.template = Some(serde_json::json!({ "checks": checks }));
        steps.push(s);
    }
    steps
}

/// Write and restore a checkpoint, recorded in a file.
fn checkpoint_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let stage = cx.stage;
    let brief = cx.shared.brief;
    cx.fed(Source::Checkpoint, |f| {
        let mut s = cx.step(
            "checkpoint-restore",
            "Write and restore a checkpoint".into(),
            Runner::File,
            "checkpoint-restore",
            f,
            match &brief.restore_plan {
                Some(plan) => format!(
                    "Write a checkpoint, kill the job, restore it as the brief's restore plan says (\"{}\"), and record the result in this file.",
                    plan.trim()
                ),
                None => "Write a checkpoint, kill the job, restore it, and record the result in this file (the brief has no restore plan yet).".into(),
            },
        );
        s.file = Some(format!("${{PROBES}}/{stage}-checkpoint.json"));
        s.template = Some(serde_json::json!({ "written": true, "restored": true, "seconds": 0, "bytes": 0 }));
        s
    })
}

/// The trial's ledger, posted as CSV.
fn ledger_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    let input = cx.shared.input;
    cx.fed(Source::Ledger, |f| {
        let mut s = cx.step(
            "ledger",
            "Send the trial's ledger".into(),
            Runner::Manual,
            "ledger",
            f,
            "Cost per completed job is the trial's ledger (what was billed) divided by the outputs it accepted: send the bill's lines and the outputs counted.".into(),
        );
        let url = format!(
            "${{RENTCHECK_SERVER}}/api/v1/briefs/{}/ledger?trial={}",
            input.brief_id, input.trial_id
        );
        let argv = [
            "curl",
            "-sS",
            "--fail-with-body",
            "-X",
            "POST",
            url.as_str(),
            "-H",
            "Authorization: Bearer ${RENTCHECK_TOKEN}",
            "-H",
            "Content-Type: text/csv",
            "--data-binary",
            "@ledger.csv",
        ];
        s.commands = vec![command("curl", &argv, CURL_HINT)];
        s
    })
}

/// The manifest lint, which the server runs itself.
fn manifest_step(cx: &StageCtx<'_>) -> Vec<PlanStep> {
    cx.fed(Source::Manifest, |f| {
        cx.step(
            "manifest-lint",
            "Lint the brief's Kubernetes manifest".into(),
            Runner::Manual,
            "manifest",
            f,
            "The server lints the brief's manifest itself (GPU limits, a pinned image, secrets from a Secret): nothing to run; edit the brief to fix what it finds.".into(),
        )
    })
}

/// nccl-tests' all-reduce from 8 B to `max`, doubling, with `gpus` GPUs a process.
fn all_reduce_perf<'a>(max: &'a str, gpus: &'a str) -> [&'a str; 9] {
    ["all_reduce_perf", "-b", "8", "-e", max, "-f", "2", "-g", gpus]
}

/// All-reduce across nodes: one process per GPU, started by mpirun or srun (whichever the site has).
fn nccl_across_nodes(devices: u32, per_node: u32, nodes: u32, max: &str) -> Vec<PlanCommand> {
    let np = devices.to_string();
    let n_per = per_node.to_string();
    let nodes_s = nodes.to_string();
    let mut mpi = command(
        "mpirun",
        &[
            &[
                "mpirun",
                "-np",
                &np,
                "-N",
                &n_per,
                "--hostfile",
                "${HOSTFILE}",
                "--tag-output",
                "-x",
                "NCCL_DEBUG=INFO",
            ][..],
            &all_reduce_perf(max, "1"),
        ]
        .concat(),
        MPI_HINT,
    );
    mpi.shell = shell_line(&[], &mpi.argv);
    let ntasks = format!("--ntasks-per-node={per_node}");
    let mut srun = command(
        "srun",
        &[
            &["srun", "-l", "-N", &nodes_s, &ntasks, "--gpus-per-task=1"][..],
            &all_reduce_perf(max, "1"),
        ]
        .concat(),
        SRUN_HINT,
    );
    srun.env = vec![("NCCL_DEBUG".into(), "INFO".into())];
    srun.shell = shell_line(&srun.env, &srun.argv);
    vec![mpi, srun]
}

/// The first eight hex digits of an id, for names people read.
pub fn short(id: TrialId) -> String {
    id.as_uuid().simple().to_string()[..8].to_owned()
}

fn goodput_targets(brief: &BriefFields) -> Vec<GoodputTarget> {
    let t = &brief.targets;
    [("ttft", t.ttft_p95_ms), ("tpot", t.itl_p95_ms), ("e2el", t.e2e_p95_ms)]
        .into_iter()
        .filter_map(|(metric, ms)| {
            ms.filter(|v| *v > 0.0).map(|ms| GoodputTarget {
                metric: metric.into(),
                ms,
            })
        })
        .collect()
}

// Long, and reads better whole: the load test's commands for each tool, one arm each.
fn load_commands(
    model: &str,
    step_key: &str,
    rate: f64,
    n: u32,
    input: u32,
    output: u32,
    goodput: &[String],
) -> Vec<PlanCommand> {
    let (rate, n, input, output) = (fmt_num(rate), n.to_string(), input.to_string(), output.to_string());
    let result = format!("{step_key}.json");
    let mut vllm: Vec<String> = [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        "${VLLM_URL}",
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--dataset-name",
        "random",
        "--random-input-len",
        &input,
        "--random-output-len",
        &output,
        "--ignore-eos",
        "--request-rate",
        &rate,
        "--burstiness",
        "1.0",
        "--num-prompts",
        &n,
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,95,99",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !goodput.is_empty() {
        vllm.push("--goodput".into());
        vllm.extend(goodput.iter().cloned());
    }
    vllm.extend(
        [
            "--save-result",
            "--save-detailed",
            "--result-dir",
            "${OUT}",
            "--result-filename",
            &result,
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    let guidellm_out = format!("${{OUT}}/{step_key}.guidellm.json");
    let data = format!("prompt_tokens={input},output_tokens={output}");
    let guidellm: Vec<String> = [
        "guidellm",
        "benchmark",
        "--target",
        "${VLLM_URL}",
        "--model",
        model,
        "--rate-type",
        "poisson",
        "--rate",
        &rate,
        "--max-requests",
        &n,
        "--data",
        &data,
        "--output-path",
        &guidellm_out,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let builtin_out = format!("${{OUT}}/{step_key}.json");
    let mut builtin: Vec<String> = [
        "rentcheck",
        "loadgen",
        "--base-url",
        "${VLLM_URL}",
        "--model",
        model,
        "--input-len",
        &input,
        "--output-len",
        &output,
        "--request-rate",
        &rate,
        "--num-prompts",
        &n,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !goodput.is_empty() {
        builtin.push("--goodput".into());
        builtin.extend(goodput.iter().cloned());
    }
    builtin.extend(["--result-file".to_owned(), builtin_out.clone()]);
    let make = |tool: &str, argv: Vec<String>, output_file: String, hint: &str| PlanCommand {
        tool: tool.into(),
        shell: shell_line_with(&[], &argv, |w| w == model),
        argv,
        env: Vec::new(),
        output_file: Some(output_file),
        install_hint: hint.into(),
    };
    vec![
        make("vllm", vllm, format!("${{OUT}}/{result}"), VLLM_HINT),
        make("guidellm", guidellm, guidellm_out, GUIDELLM_HINT),
        make(
            BUILT_IN_TOOL,
            builtin,
            builtin_out,
            "built into rentcheck: used when neither vllm nor guidellm is installed",
        ),
    ]
}

fn serve_hint(
    brief: &BriefFields,
    option: Option<&SizingOption>,
    model: &str,
    load: Option<&LoadDesign>,
) -> Option<ServeHint> {
    load?;
    if !matches!(
        brief.workload_kind,
        WorkloadKind::RealtimeInference | WorkloadKind::BatchInference | WorkloadKind::Media
    ) {
        return None;
    }
    let mut argv = vec!["vllm".to_owned(), "serve".to_owned(), model.to_owned()];
    let mut why = format!(
        "The load stage tests {model} as the brief sizes it: a {}-token context and {} sequences at once",
        brief.context_length, brief.concurrency
    );
    if let Some(o) = option {
        argv.extend([
            "--tensor-parallel-size".into(),
            o.tensor_parallel.to_string(),
            "--pipeline-parallel-size".into(),
            o.pipeline_parallel.to_string(),
        ]);
        why.push_str(&format!(
            ", on {} GPUs split as the sizing found it loads (tensor parallel {} × pipeline {})",
            o.count, o.tensor_parallel, o.pipeline_parallel
        ));
        if let Some(note) = &o.load_note {
            why.push_str(&format!("; note: {note}"));
        }
    }
    argv.extend([
        "--max-model-len".into(),
        brief.context_length.to_string(),
        "--max-num-seqs".into(),
        brief.concurrency.to_string(),
    ]);
    if brief.precision == Precision::Fp8 {
        argv.extend(["--quantization".into(), "fp8".into()]);
    }
    why.push_str(". Keep its log: it says how much KV cache it allocated.");
    Some(ServeHint {
        command: format!(
            "{} 2>&1 | tee \"${{VLLM_LOG}}\"",
            shell_line_with(&[], &argv, |w| w == model)
        ),
        why,
    })
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

        // Two nodes of eight: one rank per GPU under a launcher, and NCCL names its NICs.
        let wide = plan_of(&b, "H100 SXM", 16);
        let nccl = step(&wide, "1-nccl-all-reduce");
        let mpi = &nccl.commands[0];
        assert_eq!(mpi.tool, "mpirun");
        assert_eq!(flag(&mpi.argv, "-np"), "16");
        assert_eq!(flag(&mpi.argv, "-N"), "8");
        assert_eq!(flag(&mpi.argv, "-g"), "1");
        assert!(mpi.argv.contains(&"NCCL_DEBUG=INFO".to_owned()));
        assert_eq!(nccl.commands[1].tool, "srun");
        assert!(wide.variables.iter().any(|v| v.name == HOSTFILE));
    }

    #[test]
    fn diag_levels_follow_the_stage() {
        assert_eq!([1, 2, 3, 4, 5].map(diag_level), [2, 2, 3, 3, 1]);
    }

    #[test]
    fn the_sweep_keeps_the_briefs_own_rates_and_drops_near_duplicates() {
        let r = sweep_rates(Some(10.0), Some(5.2), Some(20.0));
        let rates: Vec<f64> = r.iter().map(|x| x.0).collect();
        assert_eq!(rates, [1.0, 2.5, 5.2, 7.5, 10.0, 15.0, 20.0]);
        assert!(r[2].1.contains("peak"), "5.2 replaces the 50 % point: {r:?}");
        // A peak far above one replica's capacity is not offered to one replica.
        assert!(!sweep_rates(Some(1.0), Some(100.0), None).iter().any(|x| x.0 == 100.0));
        // Without a predicted capacity the peak anchors the sweep.
        let r: Vec<f64> = sweep_rates(None, Some(4.0), None).iter().map(|x| x.0).collect();
        assert_eq!(r, [1.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(prompts_at(0.1), MIN_PROMPTS);
        assert_eq!(prompts_at(2.0), 240);
        assert_eq!(prompts_at(1000.0), MAX_PROMPTS);
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

    #[test]
    fn shell_lines_quote_what_the_shell_would_split() {
        let argv = [
            "curl".to_owned(),
            "${DCGM_EXPORTER_URL}/metrics".to_owned(),
            "a b".to_owned(),
        ];
        assert_eq!(
            shell_line(&[("NCCL_DEBUG".into(), "INFO".into())], &argv),
            "NCCL_DEBUG=INFO curl \"${DCGM_EXPORTER_URL}\"/metrics 'a b'"
        );
    }
}
