//! Kubernetes Jobs that run a trial's plan with `rentcheck collect --plan`. Pure: no I/O.
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

/// The Jobs, as one multi-document YAML file.
// Long, and reads better whole: a YAML template written out in the order of the file it makes.
pub fn manifest(plan: &TestPlan, settings: &JobSettings<'_>) -> String {
    let trial = &plan.trial;
    let gpus_per_node = trial.gpus_per_node.max(1).min(trial.gpu_count.max(1));
    let mut out = format!(
        "# rentcheck test plan of {trial_name} ({alloc}) for the brief {brief}.\n\
         # Each Job runs `rentcheck collect --plan` for one stage; apply, then `kubectl -n {ns} logs -f job/NAME`.\n\
         # First put the agent token (minted on the brief's Agent tokens page) in a Secret:\n\
         #   kubectl -n {ns} create secret generic rentcheck-agent --from-file=token=./agent-token\n\
         # The image is rentcheck on a base with the GPU tools (FROM NVIDIA's DCGM image, nccl-tests built in):\n\
         # pin it by digest. Re-running a Job is safe: steps the server already holds are skipped.\n",
        trial_name = q(&trial.name),
        alloc = match &trial.gpu {
            Some(g) => format!("{} × {g}", trial.gpu_count),
            None => "no allocation".into(),
        },
        brief = q(&plan.brief.name),
        ns = settings.namespace,
    );
    for stage in &plan.stages {
        let runs_tools = stage.steps.iter().any(|s| s.runner == Runner::Command);
        let runs_load = stage.steps.iter().any(|s| s.runner == Runner::Load);
        if !runs_tools && !runs_load {
            continue;
        }
        let name = format!("rentcheck-plan-{}-stage-{}", short(trial.id), stage.stage);
        let mut args = vec![
            "collect".to_owned(),
            "--plan".to_owned(),
            format!("--server={}", settings.server_url),
            format!("--brief={}", plan.brief.id),
            format!("--trial={}", trial.id),
            format!("--stage={}", stage.stage),
            "--out=/work/out".to_owned(),
            "--probes-dir=/work/probes".to_owned(),
        ];
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
        out.push_str("apiVersion: batch/v1\nkind: Job\nmetadata:\n");
        out.push_str(&format!(
            "  name: {}\n  namespace: {}\n",
            q(&name),
            q(settings.namespace)
        ));
        out.push_str("  labels:\n    app.kubernetes.io/name: rentcheck-collect\n");
        out.push_str(&format!("    rentcheck/trial: {}\n", q(&trial.id.to_string())));
        out.push_str("spec:\n  backoffLimit: 2\n  ttlSecondsAfterFinished: 86400\n");
        out.push_str("  template:\n    spec:\n      restartPolicy: Never\n");
        out.push_str("      nodeSelector:\n        kubernetes.io/hostname: \"<the rented node>\"\n");
        out.push_str("      containers:\n        - name: collect\n");
        out.push_str(&format!("          image: {}\n", q(settings.image)));
        out.push_str("          workingDir: /work\n          args:\n");
        for a in &args {
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
        out.push_str(&format!(
            "          resources:\n            requests:\n              cpu: \"{cpus}\"\n              memory: {MEMORY_REQUEST}\n            limits:\n              memory: {MEMORY_LIMIT}\n"
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
             \x20             mountPath: /work\n\
             \x20     volumes:\n\
             \x20       - name: work\n\
             \x20         emptyDir: {}\n",
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
