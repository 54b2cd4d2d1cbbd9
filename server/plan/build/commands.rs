//! The command lines of the tools a plan runs: `nvidia-smi` and `dcgmi` through one helper,
//! nccl-tests' `all_reduce_perf` inside a node and across nodes (mpirun or srun), the load test
//! (`vllm bench serve`, guidellm, the built-in load generator) and the `vllm serve` hint; each with
//! how to install its tool.

use super::load::fmt_num;
use crate::{
    briefs::model::BriefFields,
    collect::plan::{shell_line, shell_line_with, LoadDesign, PlanCommand, ServeHint, BUILT_IN_TOOL},
    sizing::{Precision, SizingOption, WorkloadKind},
};

pub(super) fn command(tool: &str, argv: &[&str], hint: &str) -> PlanCommand {
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

pub(super) const NVIDIA_SMI_HINT: &str = "nvidia-smi comes with the NVIDIA driver; in a container, request the GPUs and run under the NVIDIA Container Toolkit";
pub(super) const DCGMI_HINT: &str = "install NVIDIA DCGM (the datacenter-gpu-manager-4-cuda12 package from NVIDIA's CUDA repository, or datacenter-gpu-manager for DCGM 3) and start nv-hostengine";
pub(super) const NCCL_HINT: &str = "build nccl-tests (git clone https://github.com/NVIDIA/nccl-tests && make -C nccl-tests) and put nccl-tests/build on PATH";
const MPI_HINT: &str =
    "install Open MPI (apt install openmpi-bin), build nccl-tests with MPI=1, and list the nodes in ${HOSTFILE}";
const SRUN_HINT: &str = "run inside a Slurm allocation of the trial's nodes";
const VLLM_HINT: &str = "pip install 'vllm>=0.9.1' (it brings `vllm bench serve` with --save-detailed)";
const GUIDELLM_HINT: &str = "pip install 'guidellm>=0.4,<0.7' (0.7 renamed `guidellm benchmark`)";
pub(super) const CURL_HINT: &str = "install curl (apt install curl)";

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

/// nccl-tests' all-reduce from 8 B to `max`, doubling, with `gpus` GPUs a process.
pub(super) fn all_reduce_perf<'a>(max: &'a str, gpus: &'a str) -> [&'a str; 9] {
    ["all_reduce_perf", "-b", "8", "-e", max, "-f", "2", "-g", gpus]
}

/// All-reduce across nodes: one process per GPU, started by mpirun or srun (whichever the site has).
/// Open MPI refuses to start as root without being told (rented machines and their containers run
/// as root), and the other nodes find `all_reduce_perf` and NCCL only on this shell's `PATH` and
/// `LD_LIBRARY_PATH`, which a non-interactive ssh does not set. Under Slurm each task sees the
/// node's GPUs (`--gpus-per-node`): with one GPU a task, nccl-tests' local rank 1 asks for a second
/// device the task cannot see (NVIDIA/nccl-tests#300).
pub(super) fn nccl_across_nodes(devices: u32, per_node: u32, nodes: u32, max: &str) -> Vec<PlanCommand> {
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
                "--allow-run-as-root",
                "--bind-to",
                "none",
                "--tag-output",
                "-x",
                "PATH",
                "-x",
                "LD_LIBRARY_PATH",
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
    let gpus = format!("--gpus-per-node={per_node}");
    let mut srun = command(
        "srun",
        &[
            &["srun", "-l", "-N", &nodes_s, &ntasks, &gpus][..],
            &all_reduce_perf(max, "1"),
        ]
        .concat(),
        SRUN_HINT,
    );
    srun.env = vec![("NCCL_DEBUG".into(), "INFO".into())];
    srun.shell = shell_line(&srun.env, &srun.argv);
    vec![mpi, srun]
}

/// The load test's commands for each tool: vLLM's benchmark, GuideLLM, and rentcheck's own load
/// generator.
pub(super) fn load_commands(
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
    let load = LoadArgs {
        model,
        rate,
        n,
        input,
        output,
        goodput,
    };
    let vllm = vllm_argv(&load, &result);
    let guidellm_out = format!("${{OUT}}/{step_key}.guidellm.json");
    let guidellm = guidellm_argv(&load, &guidellm_out);
    let builtin_out = format!("${{OUT}}/{step_key}.json");
    let builtin = builtin_argv(&load, &builtin_out);
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

/// What every load tool is told: the model, the rate, how many requests of how many tokens, and
/// the goodput targets.
struct LoadArgs<'a> {
    model: &'a str,
    rate: String,
    n: String,
    input: String,
    output: String,
    goodput: &'a [String],
}

/// `vllm bench serve`, its detailed result saved as `result` in `${OUT}`.
fn vllm_argv(load: &LoadArgs<'_>, result: &str) -> Vec<String> {
    let mut vllm: Vec<String> = [
        "vllm",
        "bench",
        "serve",
        // No `--backend`: vLLM 0.8.5–0.9.1 have none (argparse refuses it), and every version
        // defaults to OpenAI's completions, which `--endpoint` names.
        "--base-url",
        "${VLLM_URL}",
        "--endpoint",
        "/v1/completions",
        "--model",
        load.model,
        "--dataset-name",
        "random",
        "--random-input-len",
        &load.input,
        "--random-output-len",
        &load.output,
        "--ignore-eos",
        "--request-rate",
        &load.rate,
        "--burstiness",
        "1.0",
        "--num-prompts",
        &load.n,
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,95,99",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !load.goodput.is_empty() {
        vllm.push("--goodput".into());
        vllm.extend(load.goodput.iter().cloned());
    }
    vllm.extend(
        [
            "--save-result",
            "--save-detailed",
            "--result-dir",
            "${OUT}",
            "--result-filename",
            result,
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    vllm
}

/// `guidellm benchmark`, its report written to `guidellm_out`: text completions, as the other tools
/// send (GuideLLM 0.4–0.6 send chat completions unless told, which add the chat template's tokens).
fn guidellm_argv(load: &LoadArgs<'_>, guidellm_out: &str) -> Vec<String> {
    let data = format!("prompt_tokens={},output_tokens={}", load.input, load.output);
    [
        "guidellm",
        "benchmark",
        "--target",
        "${VLLM_URL}",
        "--model",
        load.model,
        "--request-type",
        "text_completions",
        "--rate-type",
        "poisson",
        "--rate",
        &load.rate,
        "--max-requests",
        &load.n,
        "--data",
        &data,
        "--output-path",
        guidellm_out,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// `rentcheck loadgen`, its result written to `builtin_out`.
fn builtin_argv(load: &LoadArgs<'_>, builtin_out: &str) -> Vec<String> {
    let mut builtin: Vec<String> = [
        "rentcheck",
        "loadgen",
        "--base-url",
        "${VLLM_URL}",
        "--model",
        load.model,
        "--input-len",
        &load.input,
        "--output-len",
        &load.output,
        "--request-rate",
        &load.rate,
        "--num-prompts",
        &load.n,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if !load.goodput.is_empty() {
        builtin.push("--goodput".into());
        builtin.extend(load.goodput.iter().cloned());
    }
    builtin.extend(["--result-file".to_owned(), builtin_out.to_owned()]);
    builtin
}

pub(super) fn serve_hint(
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
    use super::*;

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
