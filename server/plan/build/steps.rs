//! The steps of one stage, one builder per tool or source (`nvidia-smi`, `dcgmi`, nccl-tests,
//! dcgm-exporter, the load sweep, the vLLM log, the harness's files, the ledger, the manifest lint),
//! the criteria each source feeds, and the order the agent runs them in.

use super::{
    commands::{
        all_reduce_perf, command, load_commands, nccl_across_nodes, nccl_max_bytes, CURL_HINT, DCGMI_HINT, NCCL_HINT,
        NVIDIA_SMI_HINT,
    },
    load::{fmt_num, prompts_at, sweep_of},
    StageCtx,
};
use crate::{
    acceptance::model::Criterion,
    collect::plan::{diag_args, diag_level_on, diag_seconds, LoadPoint, PlanStep, Runner, Scrape},
};

/// Where a criterion's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Source {
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

pub(super) fn source_of(key: &str) -> Option<Source> {
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

/// The steps of one stage, from one tool or source each (none when the stage asks nothing of it).
pub(super) type StageSteps = fn(&StageCtx<'_>) -> Vec<PlanStep>;

/// The steps in the order the agent runs them within a stage.
pub(super) const STAGE_STEPS: [StageSteps; 13] = [
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
        let n = prompts_at(*rate, output_tokens);
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
    // DCGM runs only level 1 on GeForce cards: a higher level's tests would be skipped there, and
    // a skip is not a pass.
    let datacenter = cx.shared.alloc.is_none_or(|a| a.gpu.is_datacenter());
    cx.fed(Source::DcgmDiag, |f| {
        let level = diag_level_on(stage, !datacenter);
        let what = match level {
            1 if !datacenter => "level 1 (the software deployment checks: the only level DCGM runs on GeForce cards)",
            1 => "level 1 (quick: the software deployment only)",
            2 => "level 2 (medium, about two minutes: the deployment checks plus PCIe, GPU memory and a short stress of every GPU)",
            3 => "level 3 (long, about a quarter of an hour: adds the targeted stress, power and memory-bandwidth tests)",
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
        let argv: Vec<String> = std::iter::once("dcgmi".to_owned()).chain(diag_args(level)).collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        s.commands = vec![command("dcgmi", &argv, DCGMI_HINT)];
        s.timeout_s = diag_seconds(level);
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
        // `--fail`, not `--fail-with-body`: the latter came with curl 7.76, and Ubuntu 20.04's
        // CUDA images carry 7.68.
        let argv = [
            "curl",
            "-sS",
            "--fail",
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

#[cfg(test)]
mod tests {
    use crate::collect::plan::{diag_level, diag_level_on};

    #[test]
    fn diag_levels_follow_the_stage() {
        assert_eq!([1, 2, 3, 4, 5].map(diag_level), [2, 2, 3, 3, 1]);
        assert_eq!(
            [1, 3].map(|stage| diag_level_on(stage, true)),
            [1, 1],
            "GeForce: level 1 only"
        );
    }
}
