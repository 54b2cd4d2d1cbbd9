//! The "Test plan" page of a trial: what to run on the rented machine, stage by stage, with the
//! brief's values filled in, what each step feeds and why, the one command that runs it all, and
//! the Kubernetes Jobs that do the same.

use askama::Template;
use axum::{extract::State, response::Response, routing::get, Router};
use uuid::Uuid;

use super::{
    build::fmt_num,
    job::{cron_line, cronjobs, manifest, schedule, JobSettings},
    service::{self, PlanPath},
};
use crate::{
    collect::plan::{LoadDesign, PlanCommand, PlanStage, Runner, ServeHint, Variable},
    ids::{BriefId, CommitmentId, TrialId},
    state::AppState,
    web::{
        auth::PageUser,
        extract::Path,
        page::{render, PageContext, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new().route("/briefs/{id}/trials/{tid}/plan", get(show))
}

struct StepView {
    key: String,
    title: String,
    runner: &'static str,
    kind: String,
    feeds: Vec<String>,
    why: String,
    timeout: String,
    commands: Vec<PlanCommand>,
    file: Option<String>,
    template: Option<String>,
    /// (first evidence id, when the newest arrived, how many uploads)
    held: Option<(String, String, usize)>,
}

struct StageView {
    stage: u8,
    name: String,
    criteria: Vec<String>,
    steps: Vec<StepView>,
    not_covered: Vec<(String, String)>,
}

struct LoadView {
    lengths_basis: String,
    capacity: String,
    rates: String,
    goodput: String,
    why: String,
}

#[derive(Template)]
#[template(path = "plan/show.html")]
struct PlanPage {
    ctx: PageContext,
    brief_id: BriefId,
    brief_name: String,
    trial_id: TrialId,
    trial_name: String,
    allocation: String,
    suggested: bool,
    under_sized: bool,
    /// The server's public address is plain `http://` to another machine: collect refuses to
    /// fetch a plan from it without `--allow-http`, so the page says so beside the lines.
    plain_http: bool,
    server_url: String,
    variables: Vec<Variable>,
    serve: Option<ServeHint>,
    load: Option<LoadView>,
    stages: Vec<StageView>,
    steps_total: usize,
    steps_held: usize,
    job_yaml: String,
    sky_yaml: String,
    /// The re-validation after an approval: the trial's commitment (when it has one), how often,
    /// the CronJobs and the cron line.
    revalidation: RevalidationView,
}

struct RevalidationView {
    commitment: Option<CommitmentId>,
    every_days: u32,
    schedule: String,
    cronjob_yaml: String,
    cron_line: String,
}

fn duration(seconds: u64) -> String {
    if seconds >= 3600 && seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds >= 60 {
        format!("{} min", seconds.div_ceil(60))
    } else {
        format!("{seconds} s")
    }
}

async fn show(
    State(state): State<AppState>,
    user: PageUser,
    Path(PlanPath {
        id: brief_id,
        tid: trial_id,
    }): Path<PlanPath>,
) -> PageResult<Response> {
    user.principal().may_read_brief(brief_id)?;
    let p = service::plan_for(&state, brief_id, trial_id).await?;
    let plan = &p.plan;
    let stages: Vec<StageView> = plan.stages.iter().map(stage_view).collect();
    let steps_total = plan.steps().filter(|s| s.runner != Runner::Manual).count();
    let steps_held = plan
        .steps()
        .filter(|s| s.runner != Runner::Manual && s.held.is_some())
        .count();
    let load = plan.load.as_ref().map(load_view);
    let job_yaml = manifest(
        plan,
        &JobSettings {
            server_url: &state.config.public_url,
            ..JobSettings::default()
        },
    );
    let sky_yaml = super::sky::task(plan, &state.config.public_url);
    let every_days = p
        .revalidation
        .as_ref()
        .map_or(service::DEFAULT_EVERY_DAYS, |r| r.every_days);
    let revalidation = RevalidationView {
        commitment: p.revalidation.as_ref().map(|r| r.commitment),
        every_days,
        schedule: schedule(every_days),
        cronjob_yaml: cronjobs(
            plan,
            &JobSettings {
                server_url: &state.config.public_url,
                ..JobSettings::default()
            },
            every_days,
        ),
        cron_line: cron_line(plan, &state.config.public_url, every_days),
    };
    let allocation = match &plan.trial.gpu {
        Some(gpu) => format!("{} × {gpu}", plan.trial.gpu_count),
        None => "no allocation (the sizing found no option)".into(),
    };
    render(&PlanPage {
        ctx: (&user).into(),
        brief_id,
        brief_name: p.brief.fields.name.clone(),
        trial_id,
        trial_name: p.trial.fields.name.clone(),
        allocation,
        suggested: plan.trial.suggested,
        under_sized: plan.trial.under_sized,
        plain_http: plain_http(&state.config.public_url),
        server_url: state.config.public_url.clone(),
        variables: plan.variables.clone(),
        serve: plan.serve.clone(),
        load,
        stages,
        steps_total,
        steps_held,
        job_yaml,
        sky_yaml,
        revalidation,
    })
}

/// A stage of the plan as the page shows it, each step with its commands and what it holds.
fn stage_view(s: &PlanStage) -> StageView {
    StageView {
        stage: s.stage,
        name: s.name.clone(),
        criteria: s.criteria.clone(),
        not_covered: s.not_covered.iter().map(|n| (n.key.clone(), n.how.clone())).collect(),
        steps: s
            .steps
            .iter()
            .map(|step| StepView {
                key: step.key.clone(),
                title: step.title.clone(),
                runner: step.runner.as_str(),
                kind: step.kind.clone(),
                feeds: step.feeds.clone(),
                why: step.why.clone(),
                timeout: duration(step.timeout_s),
                commands: step.commands.clone(),
                file: step.file.clone(),
                template: step
                    .template
                    .as_ref()
                    .and_then(|t| serde_json::to_string_pretty(t).ok()),
                held: step.held.as_ref().map(|h| {
                    (
                        h.evidence.first().map(Uuid::to_string).unwrap_or_default(),
                        h.received_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                        h.evidence.len(),
                    )
                }),
            })
            .collect(),
    }
}

/// The load design in words: the rates to sweep, the predicted capacity and the goodput asked for.
fn load_view(l: &LoadDesign) -> LoadView {
    LoadView {
        lengths_basis: l.lengths_basis.clone(),
        capacity: match l.capacity_rps {
            Some(c) => format!("about {} requests/s at most — {}", fmt_num(c), l.capacity_basis),
            None => format!("not predicted: {}", l.capacity_basis),
        },
        rates: l.rates_rps.iter().map(|r| fmt_num(*r)).collect::<Vec<_>>().join(", "),
        goodput: if l.goodput.is_empty() {
            "the brief sets no latency target, so no goodput is asked for".into()
        } else {
            l.goodput
                .iter()
                .map(|g| format!("{} ≤ {} ms", g.metric, fmt_num(g.ms)))
                .collect::<Vec<_>>()
                .join(", ")
        },
        why: l.why.clone(),
    }
}

/// Whether `url` is plain `http://` to a machine other than this one.
fn plain_http(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| u.scheme() == "http" && !crate::collect::allow::is_loopback_host(&u))
}
