//! The test plan of one trial, as the server sends it (`GET /api/v1/briefs/{id}/trials/{tid}/plan`)
//! and `rentcheck collect --plan` reads it: per stage of the card, the steps that produce its
//! criteria, each with its commands (in order of preference: the first whose tool is present runs),
//! what it feeds and why it is there. Plain data; the server's builder (`plan::build`) fills it.
//!
//! Commands name machine-local places as `${NAME}` variables ([`Variable`]: the vLLM URL, the
//! dcgm-exporter URL, the output and probe folders), which collect replaces with its flags' values
//! and the page shows as shell variables.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::{BriefId, TrialId};

/// The version of this document's shape; a newer agent reads older plans.
pub const PLAN_FORMAT: u32 = 1;

/// The label every upload of a plan step carries: the step's key. The server answers which step
/// keys a trial already holds (`held`), so a re-run skips them.
pub const STEP_LABEL: &str = "plan_step";

/// The built-in load generator's tool name: always present (it is rentcheck itself).
pub const BUILT_IN_TOOL: &str = "rentcheck";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TestPlan {
    pub format: u32,
    pub brief: PlanBrief,
    pub trial: PlanTrial,
    /// The card revision the plan was written from (0: the default card).
    pub card_revision: i32,
    pub variables: Vec<Variable>,
    /// How to start the server under test for the load stage (vLLM with the sizing's layout).
    #[serde(default)]
    pub serve: Option<ServeHint>,
    /// The load sweep's design, when the card has load criteria for a served model.
    #[serde(default)]
    pub load: Option<LoadDesign>,
    pub stages: Vec<PlanStage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanBrief {
    #[schema(value_type = Uuid)]
    pub id: BriefId,
    pub name: String,
    /// The model the load test asks for (the catalogue's Hugging Face id, else the brief's name).
    pub model: String,
    pub workload_kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanTrial {
    #[schema(value_type = Uuid)]
    pub id: TrialId,
    pub name: String,
    /// `None` when the sizing has no option at all.
    pub gpu: Option<String>,
    pub gpu_count: u32,
    /// GPUs one node holds (counts above it span nodes).
    pub gpus_per_node: u32,
    /// The trial names no GPU: the plan tests the sizing's suggestion.
    pub suggested: bool,
    pub under_sized: bool,
}

/// A `${NAME}` the commands use, its default and what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Variable {
    pub name: String,
    pub default: String,
    pub meaning: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ServeHint {
    pub command: String,
    pub why: String,
}

/// What the load sweep was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LoadDesign {
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Why these lengths.
    pub lengths_basis: String,
    /// The predicted requests per second one replica (this trial's allocation) serves, when the
    /// sizing predicts it.
    pub capacity_rps: Option<f64>,
    pub capacity_basis: String,
    /// Offered rates, ascending.
    pub rates_rps: Vec<f64>,
    /// vLLM's `--goodput` pairs from the brief's targets (ms): `ttft`, `tpot`, `e2el`.
    pub goodput: Vec<GoodputTarget>,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GoodputTarget {
    /// `ttft`, `tpot` or `e2el`, as `vllm bench serve --goodput` names them.
    pub metric: String,
    pub ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanStage {
    pub stage: u8,
    pub name: String,
    /// The card's criteria of this stage that apply to the trial, as `key op threshold`.
    pub criteria: Vec<String>,
    pub steps: Vec<PlanStep>,
    /// Criteria no step of the plan produces, and how to send them.
    #[serde(default)]
    pub not_covered: Vec<NotCovered>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NotCovered {
    pub key: String,
    pub how: String,
}

/// How collect runs a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Runner {
    /// Run the first command whose tool is present; its output (stdout, or stderr when stdout is
    /// empty) is the evidence.
    Command,
    /// One load point: scrape before, run the load (a command, or the built-in generator),
    /// scrape after, send the result file and the four scrapes.
    Load,
    /// Read a file a harness writes (probes, checkpoint restore); skipped while it is absent.
    File,
    /// Done by a person or by the server (the ledger, the manifest lint): listed, never run.
    Manual,
}

impl Runner {
    pub fn as_str(&self) -> &'static str {
        match self {
            Runner::Command => "command",
            Runner::Load => "load",
            Runner::File => "file",
            Runner::Manual => "manual",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanStep {
    /// Unique in the plan and stable across builds of it: `{stage}-{what}` (`1-dcgm-diag`,
    /// `3-load-2rps`). Uploads carry it as the `plan_step` label.
    pub key: String,
    pub stage: u8,
    pub title: String,
    pub runner: Runner,
    /// The evidence kind the output is posted as (a load step's result file; its scrapes name
    /// their own).
    pub kind: String,
    /// The card's criteria this step's output is read for.
    pub feeds: Vec<String>,
    pub why: String,
    /// Seconds the step may run before it is stopped.
    pub timeout_s: u64,
    /// In order of preference; collect runs the first whose tool is present.
    pub commands: Vec<PlanCommand>,
    #[serde(default)]
    pub load: Option<LoadPoint>,
    /// Prometheus pages scraped before and after a load point.
    #[serde(default)]
    pub scrapes: Vec<Scrape>,
    /// The window id pairing a load point's before and after scrapes.
    #[serde(default)]
    pub window: Option<String>,
    /// A file runner's path (with `${PROBES}`).
    #[serde(default)]
    pub file: Option<String>,
    /// What a file runner's file holds: a skeleton to fill in.
    #[serde(default)]
    pub template: Option<serde_json::Value>,
    /// What the server already holds of this step for the trial (a re-run skips it): uploads that
    /// parsed, newer than any that failed.
    #[serde(default)]
    pub held: Option<Held>,
    /// Uploads of this step the server could not parse. A re-run sends the step again under new
    /// idempotency keys (this count is part of them), so it is stored rather than refused as a
    /// repeat of the failed attempt.
    #[serde(default)]
    pub failed_uploads: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanCommand {
    /// The program looked up on PATH (`rentcheck` is the built-in load generator).
    pub tool: String,
    /// The program and its arguments, `${NAME}` variables unreplaced.
    pub argv: Vec<String>,
    /// Environment the command needs: [name, value] pairs.
    #[serde(default)]
    #[schema(value_type = Vec<Vec<String>>)]
    pub env: Vec<(String, String)>,
    /// The same as one shell line, to copy.
    pub shell: String,
    /// Where the command writes its result, when it is not stdout.
    #[serde(default)]
    pub output_file: Option<String>,
    /// How to get the tool when it is missing.
    pub install_hint: String,
}

/// One offered rate of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = PlanLoadPoint)]
pub struct LoadPoint {
    pub rate_rps: f64,
    pub num_prompts: u32,
    pub input_tokens: u32,
    pub output_tokens: u32,
    /// Why this rate (a share of the predicted capacity, the brief's peak, its throughput target).
    pub basis: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Scrape {
    pub url: String,
    /// `vllm-metrics` or `dcgm-exporter`.
    pub kind: String,
    /// Without it the load point is not worth running (vLLM's page is; dcgm-exporter's is not).
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Held {
    pub evidence: Vec<Uuid>,
    pub received_at: chrono::DateTime<chrono::Utc>,
}

impl TestPlan {
    /// Every step in stage order.
    pub fn steps(&self) -> impl Iterator<Item = &PlanStep> {
        self.stages.iter().flat_map(|s| s.steps.iter())
    }
}

/// `text` with each `${NAME}` of `values` replaced; unknown names stay as they are.
pub fn substitute(text: &str, values: &[(String, String)]) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    out
}

/// One word of a line a person copies into a shell, taken literally: bare when it holds only
/// characters no shell reads specially, else single-quoted (a quote inside as `'\''`). Nothing in
/// it is expanded, substituted or run, whatever it holds.
pub fn shell_literal(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// One word of a command the plan builder wrote: its `${NAME}` placeholders (an upper-case name)
/// stay outside quotes, in double quotes of their own so the shell expands them without
/// splitting, and every other run of text is [`shell_literal`].
pub fn shell_template(word: &str) -> String {
    if word.is_empty() {
        return "''".to_owned();
    }
    let mut out = String::new();
    let mut rest = word;
    while !rest.is_empty() {
        let (literal, placeholder, after) = match next_placeholder(rest) {
            Some((start, end)) => (&rest[..start], Some(&rest[start..end]), &rest[end..]),
            None => (rest, None, ""),
        };
        if !literal.is_empty() {
            out.push_str(&shell_literal(literal));
        }
        if let Some(p) = placeholder {
            out.push('"');
            out.push_str(p);
            out.push('"');
        }
        rest = after;
    }
    out
}

/// Where the first `${NAME}` (NAME: `A-Z`, `0-9`, `_`, not starting with a digit) of `text` starts
/// and ends.
fn next_placeholder(text: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(i) = text[from..].find("${") {
        let start = from + i;
        let name_start = start + 2;
        let name_len = text[name_start..]
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(text.len() - name_start);
        let name = &text[name_start..name_start + name_len];
        let valid = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit());
        if valid && text[name_start + name_len..].starts_with('}') {
            return Some((start, name_start + name_len + 1));
        }
        from = start + 2;
    }
    None
}

/// The shell line of a command the builder wrote: its environment, then its arguments, each a
/// [`shell_template`].
pub fn shell_line(env: &[(String, String)], argv: &[String]) -> String {
    shell_line_with(env, argv, |_| false)
}

/// The same, with the words for which `is_literal` holds (text a person typed, values already
/// filled in) quoted as [`shell_literal`]: a `${NAME}` inside them is text, not a placeholder.
pub fn shell_line_with(env: &[(String, String)], argv: &[String], is_literal: impl Fn(&str) -> bool) -> String {
    let word = |w: &str| {
        if is_literal(w) {
            shell_literal(w)
        } else {
            shell_template(w)
        }
    };
    env.iter()
        .map(|(k, v)| format!("{k}={}", word(v)))
        .chain(argv.iter().map(|a| word(a)))
        .collect::<Vec<_>>()
        .join(" ")
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

/// [`diag_level`] on the cards under test: DCGM runs only level 1 on GeForce cards, where a higher
/// level's tests would be skipped, and a skip is not a pass.
pub fn diag_level_on(stage: u8, geforce: bool) -> u8 {
    if geforce {
        1
    } else {
        diag_level(stage)
    }
}

/// `dcgmi diag`'s arguments at `level`, its report as JSON.
pub fn diag_args(level: u8) -> Vec<String> {
    ["diag", "-r", &level.to_string(), "-j"].map(str::to_owned).to_vec()
}

/// How long `dcgmi diag -r level` may run: level 2 takes minutes on a node of eight GPUs, level 3
/// about half an hour.
pub fn diag_seconds(level: u8) -> u64 {
    match level {
        1 => 300,
        2 => 1200,
        3 => 5400,
        _ => 4 * 3600,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copyable_word_keeps_placeholders_outside_quotes_and_everything_else_literal() {
        assert_eq!(
            shell_template("${DCGM_EXPORTER_URL}/metrics"),
            "\"${DCGM_EXPORTER_URL}\"/metrics"
        );
        assert_eq!(shell_template("${OUT}$(touch x)"), "\"${OUT}\"'$(touch x)'");
        assert_eq!(shell_template("it's"), r"'it'\''s'");
        assert_eq!(shell_template("a b"), "'a b'");
        assert_eq!(shell_template(""), "''");
        assert_eq!(shell_template("meta-llama/Llama-3.1-8B"), "meta-llama/Llama-3.1-8B");
        // Not a placeholder: lower case, a digit first, no closing brace, backquotes.
        assert_eq!(shell_template("${out}"), "'${out}'");
        assert_eq!(shell_template("${1X}"), "'${1X}'");
        assert_eq!(shell_template("${OUT"), "'${OUT'");
        assert_eq!(shell_template("`id`${OUT}"), "'`id`'\"${OUT}\"");
        // A person's text is literal through and through.
        assert_eq!(shell_literal("${OUT}$(touch x)"), "'${OUT}$(touch x)'");
        let argv = ["vllm".to_owned(), "${OUT}'x".to_owned(), "${OUT}/r.json".to_owned()];
        assert_eq!(
            shell_line_with(&[], &argv, |w| w == "${OUT}'x"),
            r#"vllm '${OUT}'\''x' "${OUT}"/r.json"#
        );
    }

    #[test]
    fn variables_are_replaced_and_unknown_ones_kept() {
        let values = vec![("VLLM_URL".to_owned(), "http://10.0.0.5:8000".to_owned())];
        assert_eq!(
            substitute("--base-url=${VLLM_URL} ${OUT}/x", &values),
            "--base-url=http://10.0.0.5:8000 ${OUT}/x"
        );
    }
}
