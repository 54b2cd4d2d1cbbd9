//! Kubernetes Jobs that run a trial's plan with `rentcheck collect --plan`, and the CronJobs that
//! re-validate a committed trial on a schedule with `collect --plan --rerun`. Pure: no I/O.
//!
//! One Job per stage that has something to run: a stage that runs GPU tools (nvidia-smi, DCGM,
//! nccl-tests) asks for the node's GPUs, so it runs before vLLM takes them (DCGM's diagnostics
//! need them to themselves); a load stage asks for none and runs while vLLM serves. Probe and
//! checkpoint files come from the team's harness, not from a Job.

use super::build::{short, DCGM_EXPORTER_URL, VLLM_URL};
use crate::collect::plan::{Runner, TestPlan};

/// Where the Jobs run and what they run.
pub struct JobSettings<'a> {
    /// The rentcheck server as the cluster reaches it.
    pub server_url: &'a str,
    pub namespace: &'a str,
    pub image: &'a str,
}

impl Default for JobSettings<'_> {
    fn default() -> Self {
        Self {
            server_url: "http://rentcheck.rentcheck.svc.cluster.local:8080",
            namespace: "rentcheck",
            image: "registry.example.com/rentcheck@sha256:<digest>",
        }
    }
}

/// The one YAML scalar quoter: JSON's double-quoted string is a YAML double-quoted scalar, with
/// every line break and control character escaped, so no value can end its line or its document.
/// Text from a person goes through it everywhere in the file, comments included.
pub fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Memory the agent asks for and may use: scrapes are capped at 64 MiB each, SSE lines at 1 MiB,
/// and the built-in load generator stayed under 80 MiB up to about 950 open streams
/// (docs/benchmarks.md), so 2 GiB holds the largest sweep with room to spare.
const MEMORY_REQUEST: &str = "512Mi";
const MEMORY_LIMIT: &str = "2Gi";
/// [`MEMORY_LIMIT`] and the GPU tools' 1 GiB `/dev/shm`, which a memory-backed `emptyDir` charges
/// to the pod.
const MEMORY_LIMIT_WITH_SHM: &str = "3Gi";

/// The cron schedule of a re-validation every `every_days` days at 03:00 UTC, as a day-of-month
/// step that never leaves more than `every_days` days between two runs: `0 3 */N * *` (days 1,
/// 1 + N, …; the month's last run is at most N days before the next month's first) up to 31 days,
/// then every M months on the 1st, M = N ÷ 31 rounded down (`0 3 1 */M *`).
pub fn schedule(every_days: u32) -> String {
    match every_days.max(1) {
        1 => "0 3 * * *".to_owned(),
        n @ 2..=30 => format!("0 3 */{n} * *"),
        n if n < 62 => "0 3 1 * *".to_owned(),
        n => format!("0 3 1 */{} *", (n / 31).min(12)),
    }
}

/// The Jobs, as one multi-document YAML file.
pub fn manifest(plan: &TestPlan, settings: &JobSettings<'_>) -> String {
    documents(plan, settings, None)
}

/// The re-validation of a committed trial: per stage, a CronJob of the stage's Job running
/// `collect --plan --rerun` on [`schedule`] of `every_days`.
pub fn cronjobs(plan: &TestPlan, settings: &JobSettings<'_>, every_days: u32) -> String {
    documents(plan, settings, Some(every_days))
}

/// The crontab lines of a re-validation, for a box without Kubernetes: one per stage that can run
/// beside the serving vLLM — its load, `nvidia-smi` — but not the stages of DCGM's diagnostic or
/// nccl-tests, which need the GPUs to themselves. Cron's own `PATH` is `/usr/bin:/bin`, where
/// `cargo install` puts no rentcheck: the line names the usual places.
pub fn cron_line(plan: &TestPlan, server_url: &str, every_days: u32) -> String {
    let exclusive = |kind: &str| kind == "dcgm-diag" || kind == "nccl-tests";
    let serving_stages: Vec<u8> = plan
        .stages
        .iter()
        .filter(|s| {
            s.steps
                .iter()
                .any(|x| matches!(x.runner, Runner::Load | Runner::Command))
                && !s.steps.iter().any(|x| exclusive(&x.kind))
        })
        .map(|s| s.stage)
        .collect();
    if serving_stages.is_empty() {
        return "# Every stage of this plan needs the GPUs to itself: run it in a maintenance window, not from cron."
            .into();
    }
    serving_stages
        .iter()
        .map(|stage| {
            format!(
                "{} PATH=$HOME/.cargo/bin:$HOME/.local/bin:/usr/local/bin:/usr/bin:/bin RENTCHECK_TOKEN_FILE=$HOME/.rentcheck-agent-token rentcheck collect --plan --rerun --stage {stage} --server {} --brief {} --trial {} >> $HOME/rentcheck-revalidation.log 2>&1",
                schedule(every_days),
                server_url,
                plan.brief.id,
                plan.trial.id
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The Jobs, or with `every_days` the re-validation CronJobs, as one multi-document YAML file: a
/// YAML template written out in the order of the file it makes.
fn documents(plan: &TestPlan, settings: &JobSettings<'_>, every_days: Option<u32>) -> String {
    let trial = &plan.trial;
    let gpus_per_node = trial.gpus_per_node.max(1).min(trial.gpu_count.max(1));
    let mut out = file_comment(plan, settings, every_days);
    for stage in &plan.stages {
        let runs_tools = stage.steps.iter().any(|s| s.runner == Runner::Command);
        let runs_load = stage.steps.iter().any(|s| s.runner == Runner::Load);
        if !runs_tools && !runs_load {
            continue;
        }
        let name = format!(
            "rentcheck-{}-{}-stage-{}",
            if every_days.is_some() { "revalidate" } else { "plan" },
            short(trial.id),
            stage.stage
        );
        let args = collect_args(plan, settings, stage.stage, every_days.is_some(), runs_load);
        out.push_str("---\n");
        out.push_str(&format!(
            "# Stage {n}, {stage_name}: {what}\n",
            n = stage.stage,
            stage_name = q(&stage.name),
            what = if runs_tools {
                "the GPU tools, on the rented node with all its GPUs (run it before vLLM starts)"
            } else {
                "the load sweep against the server under test (set --vllm-url and --dcgm-exporter-url to the node's)"
            }
        ));
        out.push_str(&format!(
            "apiVersion: batch/v1\nkind: {}\nmetadata:\n",
            if every_days.is_some() { "CronJob" } else { "Job" }
        ));
        out.push_str(&format!(
            "  name: {}\n  namespace: {}\n",
            q(&name),
            q(settings.namespace)
        ));
        out.push_str("  labels:\n    app.kubernetes.io/name: rentcheck-collect\n");
        out.push_str(&format!("    rentcheck/trial: {}\n", q(&trial.id.to_string())));
        // A CronJob's Job is the same Job, four spaces deeper under `jobTemplate`.
        let mut job = std::mem::take(&mut out);
        if let Some(n) = every_days {
            job.push_str(&format!(
                "spec:\n  schedule: {}\n  timeZone: \"Etc/UTC\"\n  concurrencyPolicy: Forbid\n",
                q(&schedule(n))
            ));
            if runs_tools {
                // The GPU tools need the node's GPUs to themselves, which a serving node never has.
                job.push_str(
                    "  # Needs the node's GPUs free (vLLM stopped): set suspend to false for a maintenance window.\n  suspend: true\n",
                );
            }
            job.push_str("  jobTemplate:\n");
        }
        out.push_str(&job_spec(settings, &args, runs_tools, runs_load, gpus_per_node));
        let spec = std::mem::take(&mut out);
        out = job;
        if every_days.is_some() {
            for line in spec.lines() {
                out.push_str("    ");
                out.push_str(line);
                out.push('\n');
            }
        } else {
            out.push_str(&spec);
        }
    }
    out
}

/// The comments at the top of the file: what it is, the Secret to create first, the image.
fn file_comment(plan: &TestPlan, settings: &JobSettings<'_>, every_days: Option<u32>) -> String {
    let trial = &plan.trial;
    format!(
        "# rentcheck test plan of {trial_name} ({alloc}) for the brief {brief}.\n{what}\
         # First put the agent token (minted on the brief's Agent tokens page) in a Secret:\n\
         #   kubectl -n {ns} create secret generic rentcheck-agent --from-file=token=./agent-token\n\
         # The image is rentcheck on a base with the GPU tools (FROM NVIDIA's DCGM image, nccl-tests built in):\n\
         # pin it by digest. {again}\n",
        what = match every_days {
            None => format!(
                "# Each Job runs `rentcheck collect --plan` for one stage; apply, then `kubectl -n {} logs -f job/NAME`.\n",
                settings.namespace
            ),
            Some(n) => format!(
                "# Re-validation of the committed trial: each CronJob runs `rentcheck collect --plan --rerun` for one\n\
                 # stage at 03:00 UTC, at most every {n} days (`{}`); every run counts as a re-run of the trial.\n",
                schedule(n)
            ),
        },
        again = if every_days.is_some() {
            "A re-run runs every step again; a retry the same UTC day resumes where it stopped."
        } else {
            "Re-running a Job is safe: steps the server already holds are skipped."
        },
        trial_name = q(&trial.name),
        alloc = match &trial.gpu {
            Some(g) => format!("{} × {g}", trial.gpu_count),
            None => "no allocation".into(),
        },
        brief = q(&plan.brief.name),
        ns = settings.namespace,
    )
}

/// The arguments of `rentcheck collect --plan` for one stage (`--rerun` for a re-validation), with
/// the endpoints a load stage reads.
fn collect_args(plan: &TestPlan, settings: &JobSettings<'_>, stage: u8, rerun: bool, runs_load: bool) -> Vec<String> {
    let trial = &plan.trial;
    let mut args = vec!["collect".to_owned(), "--plan".to_owned()];
    if rerun {
        args.push("--rerun".to_owned());
    }
    args.extend([
        format!("--server={}", settings.server_url),
        format!("--brief={}", plan.brief.id),
        format!("--trial={}", trial.id),
        format!("--stage={stage}"),
        "--out=/work/out".to_owned(),
        "--probes-dir=/work/probes".to_owned(),
    ]);
    if runs_load {
        args.push(format!(
            "--vllm-url={}",
            default_of(plan, VLLM_URL, "http://vllm.serving.svc.cluster.local:8000")
        ));
        args.push(format!(
            "--dcgm-exporter-url={}",
            default_of(
                plan,
                DCGM_EXPORTER_URL,
                "http://nvidia-dcgm-exporter.gpu-operator.svc.cluster.local:9400"
            )
        ));
    }
    args
}

/// A Job's spec: its one container with the arguments, the token, the resources (GPUs for the
/// tools), and a locked-down security context.
fn job_spec(
    settings: &JobSettings<'_>,
    args: &[String],
    runs_tools: bool,
    runs_load: bool,
    gpus_per_node: u32,
) -> String {
    let mut out = String::new();
    out.push_str("spec:\n  backoffLimit: 2\n  ttlSecondsAfterFinished: 86400\n");
    out.push_str("  template:\n    spec:\n      restartPolicy: Never\n");
    out.push_str("      nodeSelector:\n        kubernetes.io/hostname: \"<the rented node>\"\n");
    out.push_str("      containers:\n        - name: collect\n");
    out.push_str(&format!("          image: {}\n", q(settings.image)));
    out.push_str("          workingDir: /work\n          args:\n");
    for a in args {
        out.push_str(&format!("            - {}\n", q(a)));
    }
    out.push_str(
        "          env:\n\
         \x20           - name: RENTCHECK_TOKEN\n\
         \x20             valueFrom:\n\
         \x20               secretKeyRef:\n\
         \x20                 name: rentcheck-agent\n\
         \x20                 key: token\n\
         \x20           # The node's name, not the pod's: a retried pod then skips what was sent.\n\
         \x20           - name: RENTCHECK_HOST\n\
         \x20             valueFrom:\n\
         \x20               fieldRef:\n\
         \x20                 fieldPath: spec.nodeName\n",
    );
    if runs_tools {
        out.push_str(
            "            - name: NVIDIA_DRIVER_CAPABILITIES\n\
             \x20             value: \"compute,utility\"\n",
        );
    }
    // CPU is requested, never limited: throttling would add to the latencies the load measures.
    let cpus = if runs_load { 2 } else { 1 };
    // The GPU tools' shared memory (below) is charged to the pod's memory: the limit carries it.
    let limit = if runs_tools {
        MEMORY_LIMIT_WITH_SHM
    } else {
        MEMORY_LIMIT
    };
    out.push_str(&format!(
        "          resources:\n            requests:\n              cpu: \"{cpus}\"\n              memory: {MEMORY_REQUEST}\n            limits:\n              memory: {limit}\n"
    ));
    if runs_tools {
        out.push_str(&format!("              nvidia.com/gpu: {gpus_per_node}\n"));
    }
    out.push_str(
        "          securityContext:\n\
         \x20           runAsNonRoot: true\n\
         \x20           runAsUser: 65534\n\
         \x20           allowPrivilegeEscalation: false\n\
         \x20           readOnlyRootFilesystem: true\n\
         \x20         volumeMounts:\n\
         \x20           - name: work\n\
         \x20             mountPath: /work\n",
    );
    // A pod's /dev/shm is 64 MiB: NCCL between GPUs without peer-to-peer goes through shared
    // memory and fails there ("posix_fallocate failed: No space left on device", NVIDIA/nccl#525).
    if runs_tools {
        out.push_str("            - name: shm\n              mountPath: /dev/shm\n");
    }
    out.push_str("      volumes:\n        - name: work\n          emptyDir: {}\n");
    if runs_tools {
        out.push_str(
            "        - name: shm\n          emptyDir:\n            medium: Memory\n            sizeLimit: 1Gi\n",
        );
    }
    out
}

fn default_of(plan: &TestPlan, name: &str, in_cluster: &str) -> String {
    // In a cluster the loopback defaults of a rented box mean nothing: name the usual services.
    plan.variables
        .iter()
        .find(|v| v.name == name && !v.default.contains("127.0.0.1"))
        .map_or_else(|| in_cluster.to_owned(), |v| v.default.clone())
}

#[cfg(test)]
mod tests {
    use super::schedule;

    #[test]
    fn the_schedule_never_leaves_more_than_the_period_between_two_runs() {
        assert_eq!(schedule(1), "0 3 * * *");
        assert_eq!(schedule(7), "0 3 */7 * *");
        // Days 1 and 31: in a 31-day month the next run is a day later, else 30 days after the 1st.
        assert_eq!(schedule(30), "0 3 */30 * *");
        assert_eq!(schedule(31), "0 3 1 * *");
        assert_eq!(schedule(61), "0 3 1 * *");
        // 62 days: every second month (at most 31 + 31 days apart).
        assert_eq!(schedule(62), "0 3 1 */2 *");
        assert_eq!(schedule(365), "0 3 1 */11 *");
        assert_eq!(schedule(0), "0 3 * * *", "never less than daily");
        // Every day-of-month step up to 30 keeps the gap within the period, in every month length.
        for n in 2..=30u32 {
            for days_in_month in [28u32, 29, 30, 31] {
                let runs: Vec<u32> = (1..=days_in_month).filter(|d| (d - 1) % n == 0).collect();
                let gaps = runs.windows(2).map(|w| w[1] - w[0]);
                let to_next_month = days_in_month + 1 - runs.last().unwrap();
                assert!(gaps.chain([to_next_month]).all(|g| g <= n), "{n} in {days_in_month}");
            }
        }
    }
}
