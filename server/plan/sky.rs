//! A SkyPilot task that runs a trial's plan with `rentcheck collect --plan`, so `sky launch` starts
//! the acceptance test on the offer under test. Pure: no I/O.
//!
//! `resources.accelerators` is the trial's GPU and count per node (`num_nodes` nodes when the
//! trial spans several); `run` is the one `collect --plan` line; the agent token comes from the
//! launching shell as a SkyPilot secret, never written in the file. Every value from a brief or a
//! trial goes through the YAML quoter, and the run script quotes nothing it did not write.

use super::{build::short, job::q};
use crate::collect::plan::TestPlan;

/// SkyPilot's name for a GPU of the catalogue, as `sky show-gpus` lists it: the name the catalogue
/// import reads SkyPilot's rows by (`data/skypilot_accelerators.csv`: `RTX A6000` is `A6000`),
/// else the model without its form factor (SXM, PCIe), memory sizes joined with `-` (`A100-80GB`).
/// The 40 GB A100 is plain `A100` there.
pub fn accelerator_name(gpu: &str) -> String {
    if let Some(name) = crate::prices::service::skypilot_accelerator(gpu) {
        return name.to_owned();
    }
    let words: Vec<&str> = gpu
        .split_whitespace()
        .filter(|w| !matches!(*w, "Instinct") && !w.starts_with("SXM") && *w != "PCIe")
        .collect();
    match words.as_slice() {
        ["A100", "40GB"] => "A100".into(),
        _ => words.join("-"),
    }
}

/// The task, as one YAML document.
pub fn task(plan: &TestPlan, server_url: &str) -> String {
    let trial = &plan.trial;
    let per_node = trial.gpus_per_node.max(1).min(trial.gpu_count.max(1));
    let nodes = trial.gpu_count.max(1).div_ceil(per_node);
    let mut out = format!(
        "# rentcheck test plan of {trial_name} for the brief {brief}, as a SkyPilot task.\n\
         # With the agent token (minted on the brief's Agent tokens page) in your shell, never in this file:\n\
         #   export RENTCHECK_TOKEN=…\n\
         #   sky launch -c rentcheck-{short} --secret RENTCHECK_TOKEN sky.yaml\n\
         # The node needs rentcheck on PATH (an image that has it, or a setup step that copies it) and the GPU\n\
         # tools the plan names; steps whose tool is missing are skipped and listed. Re-launching is safe:\n\
         # steps the server already holds are skipped. `sky show-gpus` lists your clouds' GPU names.\n\
         name: {name}\n",
        trial_name = q(&trial.name),
        brief = q(&plan.brief.name),
        short = short(trial.id),
        name = q(&format!("rentcheck-plan-{}", short(trial.id))),
    );
    if nodes > 1 {
        out.push_str(&format!("num_nodes: {nodes}\n"));
    }
    out.push_str("resources:\n");
    match &trial.gpu {
        Some(gpu) => out.push_str(&format!(
            "  accelerators: {}\n",
            q(&format!("{}:{per_node}", accelerator_name(gpu)))
        )),
        None => out.push_str("  # The sizing found no allocation: name the accelerators to test, e.g. H100:8.\n"),
    }
    out.push_str(&format!(
        "envs:\n  RENTCHECK_SERVER: {}\n  RENTCHECK_BRIEF: {}\n  RENTCHECK_TRIAL: {}\n",
        q(server_url),
        q(&plan.brief.id.to_string()),
        q(&trial.id.to_string()),
    ));
    out.push_str("secrets:\n  RENTCHECK_TOKEN: null\n");
    out.push_str("run: |\n");
    if nodes > 1 {
        // One agent, on the first node; mpirun reaches the others through the hostfile, which
        // names each node's slots (without them Open MPI counts cores, and may refuse the ranks).
        out.push_str(
            "  if [ \"$SKYPILOT_NODE_RANK\" != 0 ]; then exit 0; fi\n\
             \x20 echo \"$SKYPILOT_NODE_IPS\" | sed \"s/$/ slots=$SKYPILOT_NUM_GPUS_PER_NODE/\" > hostfile\n",
        );
    }
    out.push_str("  rentcheck collect --plan --brief \"$RENTCHECK_BRIEF\" --trial \"$RENTCHECK_TRIAL\"\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_names_become_skypilots() {
        assert_eq!(accelerator_name("H100 SXM"), "H100");
        assert_eq!(accelerator_name("H200 SXM"), "H200");
        assert_eq!(accelerator_name("A100 80GB SXM"), "A100-80GB");
        assert_eq!(accelerator_name("A100 40GB PCIe"), "A100");
        assert_eq!(accelerator_name("L4"), "L4");
        assert_eq!(accelerator_name("Instinct MI300X"), "MI300X");
        assert_eq!(accelerator_name("V100 32GB SXM2"), "V100-32GB");
        // From the table the catalogue import reads (this used to give RTX-A6000, which SkyPilot
        // does not know).
        assert_eq!(accelerator_name("RTX A6000"), "A6000");
        assert_eq!(accelerator_name("A100 80GB PCIe"), "A100-80GB");
        // Not in the table: the words.
        assert_eq!(accelerator_name("RTX 4090"), "RTX-4090");
    }
}
