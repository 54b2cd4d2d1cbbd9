//! `rentcheck demo`: a demonstration brief (Llama 3.1 70B served in real time on 8 × H200) with
//! evidence in every stage, made from realistic tool output, and a ledger, so the review page shows
//! a real computed decision within a minute of starting. Idempotent: the brief has a fixed id,
//! evidence goes through the ordinary ingest path with fixed idempotency keys, and the ledger is
//! imported only once.
//!
//! [`load_commitment`] (which `rentcheck demo` runs after [`load`]) shows what happens after an
//! approval: a manager approved dedicating the 8 × H200 node
//! for 12 months from the first day of the month three months ago (over the computed expand, since
//! no reserved price is known), so the brief has a commitment three months into its term. The
//! provider's FOCUS rows of that reservation say it was busy every day but for three weeks of its
//! second month (under-used), and a re-validation run after the approval came back slower to the
//! first token: the commitment is regressed and the approval stale.

use std::collections::{BTreeMap, HashMap};

use axum::body::Bytes;
use chrono::{Datelike, Days, Months, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::{
    auth::{password, users, Principal, Role},
    briefs::{
        model::{validate, BriefInput},
        service as briefs,
    },
    commitments::{service as commitments, worker as commitment_worker},
    error::AppError,
    evidence::{
        model::{KindChoice, Upload},
        parsers::EvidenceKind,
        service::{self as evidence, Ingested},
    },
    ids::{BriefId, TrialId},
    ledger::{
        focus::{CommitmentUse, DiscountStatus},
        model::OutputsPatch,
        service as ledger,
    },
    review::service::{self as review, VerdictRequest},
    state::AppState,
    trials::service as trials,
    validation::Input,
};

/// The demonstration brief's id, the same in every database.
pub const DEMO_BRIEF_ID: BriefId = BriefId::from_uuid(Uuid::from_u128(0x0193_0000_de70_7000_8000_0000_0000_0070));
pub const DEMO_EMAIL: &str = "demo-manager@rentcheck.local";

/// One piece of demo evidence: its kind, stage, labels and file.
struct DemoEvidence {
    kind: EvidenceKind,
    stage: i16,
    labels: &'static [(&'static str, &'static str)],
    file: &'static str,
    bytes: &'static [u8],
}

macro_rules! demo_file {
    ($kind:ident, $stage:expr, $labels:expr, $file:literal) => {
        DemoEvidence {
            kind: EvidenceKind::$kind,
            stage: $stage,
            labels: $labels,
            file: $file,
            bytes: include_bytes!(concat!("../data/demo/", $file)),
        }
    };
}

/// The first trial's evidence, in upload order: the newest value of a key wins, so the
/// benchmark's exact percentiles come after the /metrics histogram estimates.
fn demo_evidence() -> Vec<DemoEvidence> {
    vec![
        demo_file!(NvidiaSmiList, 1, &[], "nvidia-smi-L.txt"),
        demo_file!(NvidiaSmiTopo, 1, &[], "nvidia-smi-topo.txt"),
        demo_file!(DcgmDiag, 1, &[], "dcgm-diag.json"),
        demo_file!(NcclTests, 1, &[], "nccl-all_reduce_perf.txt"),
        demo_file!(Probe, 2, &[], "probes-functional.json"),
        demo_file!(
            VllmMetrics,
            3,
            &[("window", "demo-load"), ("phase", "before")],
            "vllm-metrics-before.txt"
        ),
        demo_file!(
            VllmMetrics,
            3,
            &[("window", "demo-load"), ("phase", "after")],
            "vllm-metrics-after.txt"
        ),
        demo_file!(BenchServing, 3, &[], "vllm-bench-serve.json"),
        demo_file!(Probe, 4, &[], "probes-failure.json"),
        demo_file!(CheckpointRestore, 4, &[], "checkpoint-restore.json"),
    ]
}

/// The second trial's evidence: a smaller, cheaper-per-hour offer whose load test misses the
/// time-to-first-token target (and whose cost per completed job ends up higher).
fn demo_evidence_trial2() -> Vec<DemoEvidence> {
    vec![
        demo_file!(NvidiaSmiList, 1, &[], "trial2/nvidia-smi-L.txt"),
        demo_file!(NvidiaSmiTopo, 1, &[], "trial2/nvidia-smi-topo.txt"),
        demo_file!(DcgmDiag, 1, &[], "dcgm-diag.json"),
        demo_file!(NcclTests, 1, &[], "trial2/nccl-all_reduce_perf.txt"),
        demo_file!(Probe, 2, &[], "probes-functional.json"),
        demo_file!(BenchServing, 3, &[], "trial2/vllm-bench-serve.json"),
        demo_file!(Probe, 4, &[], "probes-failure.json"),
        demo_file!(CheckpointRestore, 4, &[], "checkpoint-restore.json"),
    ]
}

pub const DEMO_LEDGER_CSV: &str = include_str!("../data/demo/ledger.csv");
pub const DEMO_LEDGER_TRIAL2_CSV: &str = include_str!("../data/demo/trial2/ledger.csv");

/// The two demo trials: (name, provider, GPU, count, rate per GPU-hour).
const DEMO_TRIALS: [(&str, &str, &str, &str, &str); 2] = [
    ("8 × H200 · Cloud A", "Cloud A", "H200 SXM", "8", "3.50"),
    ("4 × H100 · Cloud B", "Cloud B", "H100 SXM", "4", "2.99"),
];

fn demo_brief() -> Value {
    json!({
        "name": "Support chat — Llama 3.1 70B on 8 × H200 (demo)",
        "owner": "ml-infra@example.com",
        "workload_kind": "realtime-inference",
        "catalog_model": "meta-llama/Llama-3.1-70B-Instruct",
        "model_revision": "945c8663693130f8be2ee66210e062158b2a9693",
        "precision": "bf16",
        "context_length": 8192,
        "concurrency": 16,
        "targets": { "ttft_p95_ms": 500, "itl_p95_ms": 50, "e2e_p95_ms": 8000, "error_rate": 0.01 },
        "data_boundary": "private-network",
        "needs_host_control": false,
        "only_needs_model_output": false,
        "persist": ["weights", "caches"],
        "restore_plan": "Weights are pulled from the private bucket at start; the node restores in under 5 minutes.",
        "fallback_plan": "Route to the second region's pool at reduced concurrency.",
        "max_cost_per_job": "0.02",
        "currency": "USD",
        "cost_unit": "request",
        "allocation_boundary": "dedicated-node",
        "trial_gpu": "H200 SXM",
        "trial_gpu_count": 8
    })
}

/// What `rentcheck demo` did.
pub struct DemoOutcome {
    pub brief_id: BriefId,
    pub created_brief: bool,
    pub evidence_sent: usize,
    pub evidence_replayed: usize,
    pub ledger_imported: bool,
    pub email: String,
    pub password: String,
}

/// The demo's manager, made or given a new password: the password, shown once.
async fn demo_person(state: &AppState) -> Result<String, AppError> {
    let password = crate::secrets::random_token()[..20].to_owned();
    match users::by_email(&state.pool, DEMO_EMAIL).await? {
        Some(user) => users::set_password(&state.pool, user.id, &password::hash(password.clone()).await?).await?,
        None => {
            let entry = |u: &users::UserRow| {
                crate::audit::Entry::new("demo", "user.add", &u.email, serde_json::json!({ "role": "manager" }))
            };
            users::add(&state.pool, DEMO_EMAIL, Role::Manager, Some(password.clone()), entry).await?;
        }
    }
    Ok(password)
}

/// Loads (or tops up) the demonstration and resets the demo manager's password.
pub async fn load(state: &AppState) -> Result<DemoOutcome, AppError> {
    let created_brief = ensure_brief(state).await?;
    let (first, second) = ensure_trials(state).await?;
    let (mut sent, mut replayed) = (0, 0);
    let items = demo_evidence()
        .into_iter()
        .map(|e| (first, e))
        .chain(demo_evidence_trial2().into_iter().map(|e| (second, e)));
    for (trial, item) in items {
        let labels: Map<String, Value> = item
            .labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::String((*v).to_owned())))
            .collect();
        let upload = Upload {
            kind: KindChoice::Named(item.kind),
            trial: Some(trial),
            stage: item.stage,
            collected_at: None,
            labels,
            content_type: if item.file.ends_with(".json") {
                "application/json"
            } else {
                "text/plain"
            }
            .to_owned(),
            filename: Some(item.file.to_owned()),
            raw: Bytes::from_static(item.bytes),
        };
        let key = format!("demo-{}-{}", item.stage, item.file);
        let key = if trial == first { key } else { format!("{key}-trial2") };
        match evidence::ingest(
            state,
            DEMO_BRIEF_ID,
            trial,
            Some(key),
            "system:demo",
            upload,
            Some("rentcheck demo"),
        )
        .await?
        {
            Ingested::Created { .. } => sent += 1,
            Ingested::Replayed(_) => replayed += 1,
        }
    }
    let outputs = OutputsPatch {
        accepted: Some(1_200_000),
        rejected: Some(3_100),
        retries: Some(5_400),
        failed_jobs: Some(120),
        idle_hours: Some(Decimal::from(600)),
    };
    let ledger_imported = ledger::demo_import(state, DEMO_BRIEF_ID, first, DEMO_LEDGER_CSV, &outputs).await?;
    let outputs = OutputsPatch {
        accepted: Some(180_000),
        rejected: Some(2_400),
        retries: Some(3_900),
        failed_jobs: Some(39),
        idle_hours: Some(Decimal::from(190)),
    };
    ledger::demo_import(state, DEMO_BRIEF_ID, second, DEMO_LEDGER_TRIAL2_CSV, &outputs).await?;
    let password = demo_person(state).await?;
    Ok(DemoOutcome {
        brief_id: DEMO_BRIEF_ID,
        created_brief,
        evidence_sent: sent,
        evidence_replayed: replayed,
        ledger_imported,
        email: DEMO_EMAIL.to_owned(),
        password,
    })
}

/// Names the first trial after its offer and adds the second, once; returns both ids.
async fn ensure_trials(state: &AppState) -> Result<(TrialId, TrialId), AppError> {
    let mut existing = trials::list(state, DEMO_BRIEF_ID).await?;
    let first = existing.remove(0);
    let fields = |i: usize| {
        let (name, provider, gpu, count, rate) = DEMO_TRIALS[i];
        HashMap::from([
            ("name".to_owned(), name.to_owned()),
            ("provider".to_owned(), provider.to_owned()),
            ("gpu".to_owned(), gpu.to_owned()),
            ("gpu_count".to_owned(), count.to_owned()),
            ("rate_per_gpu_hour".to_owned(), rate.to_owned()),
            ("billing".to_owned(), "on-demand".to_owned()),
            ("status".to_owned(), "running".to_owned()),
        ])
    };
    if first.fields.name != DEMO_TRIALS[0].0 {
        trials::replace(state, first.id, &Input::Form(&fields(0)), "rentcheck demo").await?;
    }
    let second = match existing.into_iter().find(|t| t.fields.name == DEMO_TRIALS[1].0) {
        Some(t) => t.id,
        None => {
            trials::create(state, DEMO_BRIEF_ID, &Input::Form(&fields(1)), "rentcheck demo")
                .await?
                .id
        }
    };
    Ok((first.id, second))
}

async fn ensure_brief(state: &AppState) -> Result<bool, AppError> {
    if briefs::exists(&state.pool, DEMO_BRIEF_ID).await? {
        return Ok(false);
    }
    let body = demo_brief();
    let Value::Object(map) = &body else {
        unreachable!("a JSON object literal")
    };
    let fields = validate(&BriefInput::Json(map)).map_err(AppError::Validation)?;
    Ok(trials::create_brief_with_id(&state.pool, DEMO_BRIEF_ID, &fields)
        .await?
        .is_some())
}

/// The life after an approval, which `rentcheck demo` adds to [`load`] (tests that build on the
/// demo's review load it without): the demo manager's approval and its commitment, the
/// re-validation run and the provider's rows (see the module's comment). Idempotent too; the
/// re-validation run counts in `outcome`'s evidence.
pub async fn load_commitment(state: &AppState, outcome: &mut DemoOutcome) -> Result<(), AppError> {
    let (first, _) = ensure_trials(state).await?;
    let user = users::by_email(&state.pool, DEMO_EMAIL)
        .await?
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("load the demo first: its manager is missing")))?;
    let manager = Principal::User {
        id: user.id,
        email: DEMO_EMAIL.to_owned(),
        role: Role::Manager,
    };
    match ensure_commitment(state, &manager, first).await? {
        Ingested::Created { .. } => outcome.evidence_sent += 1,
        Ingested::Replayed(_) => outcome.evidence_replayed += 1,
    }
    Ok(())
}

/// The provider's id of the demo's reservation (FOCUS `CommitmentDiscountId`).
const DEMO_RESERVATION_ID: &str = "cloud-a/reservations/demo-h200-node-01";
/// The reserved node, as the trial's ledger names it.
const DEMO_NODE: &str = "demo-h200-node-01";

/// The approval of the demo's commitment, once: dedicate the first trial's node for 12 months from
/// the first day of the month three months ago, over the computed action. Then the re-validation
/// run after it (replayed on later runs), the provider's rows of the reservation up to yesterday,
/// and one judgement of the commitments (as the server's background task would make).
async fn ensure_commitment(state: &AppState, manager: &Principal, first: TrialId) -> Result<Ingested, AppError> {
    let today = Utc::now().date_naive();
    let start = today
        .with_day(1)
        .and_then(|d| d.checked_sub_months(Months::new(3)))
        .unwrap_or(today);
    let commitment = match commitments::running_of_trial(state, first).await? {
        Some((id, _)) => id,
        None => {
            let current = review::review(state, DEMO_BRIEF_ID).await?;
            review::record_verdict(
                state,
                DEMO_BRIEF_ID,
                manager,
                VerdictRequest {
                    verdict: "approve".into(),
                    comment: String::new(),
                    inputs_digest: current.decision.inputs_digest.clone(),
                    trial: Some(first),
                    reservation: BTreeMap::from([
                        ("start_date".to_owned(), start.to_string()),
                        ("term_months".to_owned(), "12".to_owned()),
                    ]),
                    decision: Some("dedicate".into()),
                    override_reason:
                        "H200 capacity at Cloud A is scarce before the support launch: keep this node for the year."
                            .into(),
                    acknowledge_mismatch: false,
                },
            )
            .await?;
            let (id, _) = commitments::running_of_trial(state, first)
                .await?
                .ok_or_else(|| AppError::Internal(anyhow::anyhow!("the demo's approval opened no commitment")))?;
            let body = Map::from_iter([(
                "provider_commitment_id".to_owned(),
                Value::String(DEMO_RESERVATION_ID.into()),
            )]);
            commitments::patch(state, manager, id, &body).await?;
            id
        }
    };
    let rerun = Upload {
        kind: KindChoice::Named(EvidenceKind::BenchServing),
        trial: Some(first),
        stage: 3,
        collected_at: None,
        labels: Map::from_iter([("revalidation".to_owned(), Value::String("demo".into()))]),
        content_type: "application/json".to_owned(),
        filename: Some("rerun-vllm-bench-serve.json".to_owned()),
        raw: Bytes::from_static(include_bytes!("../data/demo/rerun-vllm-bench-serve.json")),
    };
    let sent = evidence::ingest(
        state,
        DEMO_BRIEF_ID,
        first,
        Some("demo-3-rerun-vllm-bench-serve.json".to_owned()),
        "system:demo",
        rerun,
        Some("rentcheck demo"),
    )
    .await?;
    ledger::keep_commitment_use(state, DEMO_BRIEF_ID, &provider_rows(start, today)).await?;
    commitment_worker::round(state).await?;
    tracing::debug!(%commitment, "the demo's commitment");
    Ok(sent)
}

/// The provider's daily FOCUS rows of the demo's reservation from `start` to the day before
/// `today`: the node used all day (8 GPUs), but for the second month, used only its first ten
/// days and unused the rest.
fn provider_rows(start: NaiveDate, today: NaiveDate) -> Vec<CommitmentUse> {
    let second_month = start.checked_add_months(Months::new(1)).unwrap_or(start);
    let idle_from = second_month.checked_add_days(Days::new(10)).unwrap_or(second_month);
    let idle_until = start.checked_add_months(Months::new(2)).unwrap_or(start);
    let mut out = Vec::new();
    let mut day = start;
    while day < today {
        let next = day.succ_opt().unwrap_or(day);
        let (from, to) = (
            day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc(),
            next.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc(),
        );
        let row = if day >= idle_from && day < idle_until {
            CommitmentUse::new(
                DEMO_RESERVATION_ID,
                Some(DiscountStatus::Unused),
                "",
                (from, to, to),
                "unused reservation hours",
                None,
            )
        } else {
            CommitmentUse::new(
                DEMO_RESERVATION_ID,
                Some(DiscountStatus::Used),
                DEMO_NODE,
                (from, to, to),
                "8x H200 SXM reserved",
                Some(8),
            )
        };
        out.push(row);
        day = next;
    }
    out
}
