//! Pages: the staged timeline, readiness checklist and manifest lint on the brief page; the card
//! editor (`/briefs/{id}/card`); a stored revision with its diff (`/briefs/{id}/card/revisions/{n}`).

use std::collections::HashMap;

use askama::Template;
use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Router,
};

use super::{
    api::{card_view, revision_view, save_revision, CardView},
    evaluate::EvaluatedCriterion,
    manifest_lint::{self, LintReport},
    model::{
        self, did_you_mean, parse_threshold_text, stage_name, threshold_with_unit, Criterion, Op, Threshold,
        KNOWN_KEYS, STAGES,
    },
    readiness::{self, ReadinessItem},
    repo, Status,
};
use crate::{
    auth::Role,
    briefs::model::Brief,
    error::AppError,
    ids::{BriefId, TrialId},
    state::AppState,
    validation::FieldError,
    web::{
        auth::{CsrfForm, PageUser},
        extract::{ApiQuery, BriefPath, Path},
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/briefs/{id}/card", get(editor).post(save))
        .route("/briefs/{id}/card/revisions/{n}", get(revision_page))
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Pass => "ok",
        Status::Fail => "bad",
        Status::Missing => "warn",
        Status::NotApplicable => "na",
    }
}

/// A measured value with its unit, exactly as the review shows it ("481 GB/s", "265 ms", "yes").
fn show_value(key: &str, v: &serde_json::Value) -> String {
    crate::figures::measured(v, super::model::known_key(key).map(|k| k.unit).unwrap_or(""))
}

/// A criterion's result as the card and the editor show it: its status badge and the value that
/// decided it (a dash without one), linked to its evidence.
#[derive(Default)]
pub struct ShownResult {
    pub status: &'static str,
    pub status_class: &'static str,
    pub value: String,
    pub evidence_id: Option<String>,
}

impl ShownResult {
    fn of(c: &EvaluatedCriterion) -> Self {
        Self {
            status: c.status.as_str(),
            status_class: status_class(c.status),
            value: c
                .value
                .as_ref()
                .map(|v| show_value(&c.criterion.key, v))
                .unwrap_or_else(|| "—".into()),
            evidence_id: c.evidence_id.map(|e| e.to_string()),
        }
    }
}

/// One criterion, display-ready.
pub struct CriterionRow {
    pub key: String,
    pub rule: String,
    pub required: bool,
    pub why: String,
    pub result: ShownResult,
    pub reason: String,
    pub derived: bool,
}

/// One stage of the timeline.
pub struct StageRow {
    pub stage: u8,
    pub name: &'static str,
    pub status: &'static str,
    pub status_class: &'static str,
    pub counts: String,
    pub criteria: Vec<CriterionRow>,
}

fn stage_rows(view: &CardView) -> Vec<StageRow> {
    view.stages
        .iter()
        .map(|s| {
            let criteria: Vec<CriterionRow> = view
                .criteria
                .iter()
                .filter(|c| c.criterion.stage == s.stage)
                .map(|c| CriterionRow {
                    key: c.criterion.key.clone(),
                    rule: c.criterion.summary(),
                    required: c.criterion.required,
                    why: c.criterion.why.clone().unwrap_or_default(),
                    result: ShownResult::of(c),
                    reason: c.reason.clone().unwrap_or_default(),
                    derived: c.source == "derived",
                })
                .collect();
            let mut counts = format!(
                "{} passed, {} failed, {} missing (required)",
                s.passed, s.failed, s.missing
            );
            if s.advisory_failures > 0 {
                counts.push_str(&format!("; {} advisory failing", s.advisory_failures));
            }
            StageRow {
                stage: s.stage,
                name: s.name,
                status: if criteria.is_empty() {
                    "no criteria"
                } else {
                    s.status.as_str()
                },
                status_class: if criteria.is_empty() {
                    ""
                } else {
                    status_class(s.status)
                },
                counts,
                criteria,
            }
        })
        .collect()
}

/// A lint finding, display-ready.
pub struct FindingRow {
    pub severity: &'static str,
    pub class: &'static str,
    pub object: String,
    pub path: String,
    pub message: String,
}

pub struct LintView {
    pub errors: usize,
    pub yaml_error: Option<String>,
    pub findings: Vec<FindingRow>,
}

fn lint_view(report: &LintReport) -> LintView {
    LintView {
        errors: report.error_count(),
        yaml_error: report.yaml_error.as_ref().map(|e| e.to_string()),
        findings: report
            .findings
            .iter()
            .map(|f| FindingRow {
                severity: f.severity.as_str(),
                class: match f.severity {
                    manifest_lint::Severity::Error => "bad",
                    manifest_lint::Severity::Warning => "warn",
                    manifest_lint::Severity::Note => "",
                },
                object: if f.document > 0 {
                    format!("doc {} · {}", f.document, f.object)
                } else {
                    f.object.clone()
                },
                path: f.path.clone(),
                message: f.message.clone(),
            })
            .collect(),
    }
}

/// What the brief page shows from this module.
pub struct BriefSections {
    /// The trial the card is evaluated for, e.g. "Trial 2 (2 × H100 SXM)".
    pub trial: String,
    pub revision: i32,
    pub is_default: bool,
    pub accepted: bool,
    pub stages: Vec<StageRow>,
    pub warnings: Vec<String>,
    pub readiness: Vec<ReadinessItem>,
    /// A confirmation refused for its link: the item, the link as typed, and why.
    pub refused_link: Option<RefusedLink>,
    pub lint: Option<LintView>,
    /// Saved thresholds set for another allocation: "gpu.count ≥ 8; for this trial ≥ 2".
    pub stale: Vec<String>,
}

/// Loads the timeline (of one trial), the checklist and the lint for the brief page.
pub async fn brief_sections(state: &AppState, brief: &Brief, trial: TrialId) -> PageResult<BriefSections> {
    let (view, readiness) = tokio::try_join!(
        async { Ok::<_, PageError>(card_view(state, brief, Some(trial)).await?) },
        async { Ok(readiness::load(&state.pool, brief.id).await?) },
    )?;
    Ok(BriefSections {
        trial: if view.trial.allocation.is_empty() {
            view.trial.name.clone()
        } else {
            format!("{} ({})", view.trial.name, view.trial.allocation)
        },
        stale: view
            .stale
            .iter()
            .map(|c| {
                format!(
                    "{} (stage {}): the card says {}; this trial's allocation would get {}",
                    c.key,
                    c.stage,
                    c.saved.display(),
                    c.for_this_trial.display()
                )
            })
            .collect(),
        revision: view.revision,
        is_default: view.default,
        accepted: view.accepted,
        stages: stage_rows(&view),
        warnings: view.warnings.clone(),
        readiness,
        refused_link: None,
        lint: brief
            .fields
            .k8s_manifest
            .as_deref()
            .map(|m| lint_view(&manifest_lint::lint(m))),
    })
}

/// One row of the editor: the form's values as typed, and its messages.
pub struct EditorRow {
    pub id: String,
    pub key: String,
    pub op: String,
    pub threshold: String,
    pub unit: String,
    pub stage: String,
    pub required: bool,
    pub why: String,
    pub result: ShownResult,
    /// (field, message): `key`, `op`, `threshold`, `unit`, `stage` or `row` for the whole line.
    pub errors: Vec<(String, String)>,
    /// A known key near a mistyped one ("did you mean …").
    pub suggestion: Option<&'static str>,
    /// The person keeps an unknown key as typed despite the suggestion.
    pub keep_key: bool,
}

impl EditorRow {
    /// The message at `field` ("" when none).
    pub fn error(&self, field: &str) -> &str {
        self.errors
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, m)| m.as_str())
            .unwrap_or("")
    }

    fn fail(&mut self, field: &str, message: impl Into<String>) {
        if self.error(field).is_empty() {
            self.errors.push((field.to_owned(), message.into()));
        }
    }
}

#[derive(Template)]
#[template(path = "acceptance/editor.html")]
struct EditorPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    revision: i32,
    is_default: bool,
    rows: Vec<EditorRow>,
    new_row: EditorRow,
    ops: Vec<(&'static str, &'static str)>,
    stages: Vec<(u8, &'static str)>,
    errors: Vec<String>,
    warnings: Vec<String>,
    revisions: Vec<(i32, String, String)>,
    /// The revision just saved (after the redirect that follows a save).
    saved: Option<i32>,
    known_keys: &'static [&'static str],
}

impl EditorPage {
    /// The rows of one stage, in card order.
    fn rows_of(&self, stage: &u8) -> Vec<&EditorRow> {
        let stage = stage.to_string();
        self.rows.iter().filter(|r| r.stage == stage).collect()
    }
}

fn blank_row() -> EditorRow {
    EditorRow {
        id: "new".into(),
        key: String::new(),
        op: "le".into(),
        threshold: String::new(),
        unit: String::new(),
        stage: "3".into(),
        required: true,
        why: String::new(),
        result: ShownResult::default(),
        errors: Vec::new(),
        suggestion: None,
        keep_key: false,
    }
}

fn ops() -> Vec<(&'static str, &'static str)> {
    Op::ALL.iter().map(|o| (o.as_str(), o.symbol())).collect()
}

async fn editor_page(state: &AppState, user: &PageUser, brief: &Brief) -> PageResult<EditorPage> {
    let view = card_view(state, brief, None).await?;
    let rows = view
        .criteria
        .iter()
        .enumerate()
        .map(|(i, c)| EditorRow {
            id: format!("c{i}"),
            key: c.criterion.key.clone(),
            op: c.criterion.op.as_str().into(),
            threshold: c.criterion.threshold.display(),
            unit: c.criterion.unit.clone(),
            stage: c.criterion.stage.to_string(),
            required: c.criterion.required,
            why: c.criterion.why.clone().unwrap_or_default(),
            result: ShownResult::of(c),
            ..blank_row()
        })
        .collect();
    let revisions = repo::revisions(&state.pool, brief.id)
        .await?
        .into_iter()
        .map(|r| {
            (
                r.revision,
                r.created_by,
                r.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            )
        })
        .collect();
    Ok(EditorPage {
        ctx: user.into(),
        brief_id: brief.id.to_string(),
        brief_name: brief.fields.name.clone(),
        revision: view.revision,
        is_default: view.default,
        rows,
        new_row: blank_row(),
        ops: ops(),
        stages: STAGES.to_vec(),
        errors: Vec::new(),
        warnings: view.warnings,
        revisions,
        saved: None,
        known_keys: &KNOWN_KEYS,
    })
}

/// `?saved=N`: the redirect after a save says which revision it stored.
#[derive(serde::Deserialize)]
struct EditorQuery {
    saved: Option<i32>,
}

/// The brief whose card `user` edits: the card's editor is for engineers (and above) who may edit
/// the brief.
async fn card_to_edit(state: &AppState, user: &PageUser, path: &BriefPath) -> PageResult<Brief> {
    user.require(Role::Engineer)?;
    crate::auth::teams::may_edit_brief(&state.pool, &user.principal(), path.id).await?;
    Ok(path.load(state).await?)
}

async fn editor(
    State(state): State<AppState>,
    user: PageUser,
    path: BriefPath,
    ApiQuery(q): ApiQuery<EditorQuery>,
) -> PageResult<Response> {
    let brief = card_to_edit(&state, &user, &path).await?;
    let mut page = editor_page(&state, &user, &brief).await?;
    // Only the revision in force: an old `?saved=` link says nothing once another save followed.
    page.saved = q.saved.filter(|n| *n == page.revision && !page.is_default);
    render(&page)
}

/// Reads the editor's rows (`c{i}.field` and `new.field`) back from the form.
fn rows_from_form(values: &HashMap<String, String>) -> Vec<EditorRow> {
    let get = |id: &str, f: &str| {
        values
            .get(&format!("{id}.{f}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let mut ids: Vec<(usize, String)> = values
        .keys()
        .filter_map(|k| k.strip_suffix(".key"))
        .filter_map(|id| {
            id.strip_prefix('c')
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| (n, id.to_owned()))
        })
        .collect();
    ids.sort();
    let mut rows: Vec<EditorRow> = ids
        .into_iter()
        .filter(|(_, id)| values.get(&format!("{id}.remove")).is_none())
        .map(|(_, id)| EditorRow {
            key: get(&id, "key"),
            op: get(&id, "op"),
            threshold: get(&id, "threshold"),
            unit: get(&id, "unit"),
            stage: get(&id, "stage"),
            required: values.contains_key(&format!("{id}.required")),
            why: get(&id, "why"),
            id,
            ..blank_row()
        })
        .collect();
    let new_key = get("new", "key");
    if !new_key.is_empty() {
        rows.push(EditorRow {
            id: "new".into(),
            key: new_key,
            op: get("new", "op"),
            threshold: get("new", "threshold"),
            unit: get("new", "unit"),
            stage: get("new", "stage"),
            required: values.contains_key("new.required"),
            keep_key: values.contains_key("new.keep_key"),
            ..blank_row()
        });
    }
    rows
}

/// Turns the rows into criteria; errors are attached to their rows, at their fields.
fn criteria_from_rows(rows: &mut [EditorRow]) -> Option<(Vec<Criterion>, Vec<String>)> {
    let mut criteria = Vec::new();
    let mut ok = true;
    for row in rows.iter_mut() {
        let op = row.op.parse::<Op>();
        let stage = row.stage.parse::<u8>().ok().filter(|s| (1..=5).contains(s));
        if op.is_err() {
            row.fail("op", "must be one of lt, le, gt, ge, eq, ne");
        }
        if stage.is_none() {
            row.fail("stage", "must be 1 to 5");
        }
        if row.threshold.is_empty() {
            row.fail("threshold", "is required");
        }
        // A new key that is not known but near one that is, is most likely a typo: ask first.
        if row.id == "new" && !row.keep_key {
            if let Some(near) = did_you_mean(&row.key) {
                row.suggestion = Some(near);
                row.fail(
                    "key",
                    format!("{} is not a metric key rentcheck knows. Did you mean {near}?", row.key),
                );
            }
        }
        // `60ms`, `0.5 s`, `90 %`: the number in the key's own unit.
        let threshold = match threshold_with_unit(&row.key, &row.threshold) {
            Ok(Some((threshold, unit))) => {
                row.unit = unit;
                Some(threshold)
            }
            Ok(None) => Some(parse_threshold_text(&row.key, &row.threshold)),
            Err(message) => {
                row.fail("threshold", message);
                None
            }
        };
        match (op, stage, threshold, row.errors.is_empty()) {
            (Ok(op), Some(stage), Some(threshold), true) => criteria.push(Criterion {
                key: row.key.clone(),
                op,
                threshold,
                unit: row.unit.clone(),
                stage,
                required: row.required,
                why: Some(row.why.clone()).filter(|w| !w.is_empty()),
            }),
            _ => ok = false,
        }
    }
    if !ok {
        return None;
    }
    match model::validate_criteria(criteria, "rows") {
        Ok(card) => Some((card.criteria, card.warnings)),
        Err(errors) => {
            for FieldError { field, message } in errors {
                // "rows[i].name" → row i, field name
                let index = field
                    .strip_prefix("rows[")
                    .and_then(|r| r.split_once(']'))
                    .and_then(|(n, rest)| {
                        n.parse::<usize>()
                            .ok()
                            .map(|n| (n, rest.trim_start_matches('.').to_owned()))
                    });
                match index.and_then(|(n, name)| rows.get_mut(n).map(|r| (r, name))) {
                    Some((row, name)) if !name.is_empty() => row.fail(&name, message),
                    Some((row, _)) => row.fail("row", message),
                    None => {
                        if let Some(row) = rows.first_mut() {
                            row.fail("row", message);
                        }
                    }
                }
            }
            None
        }
    }
}

async fn save(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    let id = path.id;
    let brief = card_to_edit(&state, &user, &path).await?;
    let mut rows = rows_from_form(&values);
    match criteria_from_rows(&mut rows) {
        Some((criteria, _warnings)) => {
            let saved = save_revision(&state, &brief, &criteria, &user.principal()).await?;
            Ok(Redirect::to(&format!("/briefs/{id}/card?saved={}", saved.revision)).into_response())
        }
        None => {
            let mut page = editor_page(&state, &user, &brief).await?;
            page.warnings = model::unknown_key_warnings(
                &rows
                    .iter()
                    .map(|r| Criterion {
                        key: r.key.clone(),
                        op: Op::Eq,
                        threshold: Threshold::Bool(true),
                        unit: String::new(),
                        stage: 1,
                        required: false,
                        why: None,
                    })
                    .collect::<Vec<_>>(),
            );
            let mut new_row = blank_row();
            if let Some(pos) = rows.iter().position(|r| r.id == "new") {
                new_row = rows.remove(pos);
            }
            page.errors = rows
                .iter()
                .chain(std::iter::once(&new_row))
                .flat_map(|r| {
                    r.errors
                        .iter()
                        .map(move |(field, e)| format!("{} (stage {}), {field}: {e}", r.key, r.stage))
                })
                .collect();
            page.rows = rows;
            page.new_row = new_row;
            let mut response = render(&page)?;
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(response)
        }
    }
}

#[derive(Template)]
#[template(path = "acceptance/revision.html")]
struct RevisionPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    revision: i32,
    previous: i32,
    created_by: String,
    created_at: String,
    criteria: Vec<(u8, &'static str, String, bool)>,
    added: Vec<String>,
    removed: Vec<String>,
    changed: Vec<(String, String, String)>,
}

async fn revision_page(
    State(state): State<AppState>,
    user: PageUser,
    path: BriefPath,
    Path((_, n)): Path<(BriefId, i64)>,
) -> PageResult<Response> {
    let brief = path.load(&state).await?;
    let _id = brief.id;
    let r = revision_view(&state, &brief, n).await?;
    let line = |c: &Criterion| {
        format!(
            "stage {} · {}{}",
            c.stage,
            c.summary(),
            if c.required { "" } else { " (advisory)" }
        )
    };
    render(&RevisionPage {
        ctx: (&user).into(),
        brief_id: brief.id.to_string(),
        brief_name: brief.fields.name.clone(),
        revision: r.revision,
        previous: r.previous,
        created_by: r.created_by,
        created_at: r.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        criteria: r
            .criteria
            .iter()
            .map(|c| (c.stage, stage_name(c.stage), c.summary(), c.required))
            .collect(),
        added: r.diff.added.iter().map(line).collect(),
        removed: r.diff.removed.iter().map(line).collect(),
        changed: r
            .diff
            .changed
            .iter()
            .map(|c| {
                (
                    format!("stage {} · {} ({})", c.stage, c.key, c.fields.join(", ")),
                    line(&c.before),
                    line(&c.after),
                )
            })
            .collect(),
    })
}

impl BriefSections {
    /// The refused link of checklist item `item`, if its confirmation was the one refused.
    pub fn refused_link_of(&self, item: &str) -> Option<&RefusedLink> {
        self.refused_link.as_ref().filter(|r| r.item == item)
    }
}

/// A readiness confirmation refused for its link, to show at the item's row.
#[derive(Debug, Clone)]
pub struct RefusedLink {
    pub item: String,
    pub typed: String,
    pub message: String,
}

/// `POST /briefs/{id}/readiness` from the brief page's checklist: records the confirmation and
/// answers the redirect back, or hands back the refused link (the brief page, which owns the
/// route, shows it again at its row with what was typed).
pub async fn confirm(
    state: &AppState,
    user: &PageUser,
    path: &BriefPath,
    values: &std::collections::HashMap<String, String>,
) -> PageResult<Result<Response, RefusedLink>> {
    let id = path.id;
    card_to_edit(state, user, path).await?;
    let item = values.get("item").map(String::as_str).unwrap_or("");
    if !readiness::is_item(item) {
        return Err(AppError::Validation(vec![FieldError::new("item", "is not a readiness item")]).into());
    }
    let link = values.get("link").map(|s| s.trim()).filter(|s| !s.is_empty());
    if let Some(link) = link {
        if !readiness::valid_link(link) {
            return Ok(Err(RefusedLink {
                item: item.to_owned(),
                typed: link.to_owned(),
                message: "is not a link we can keep: give an address starting with https:// (or http://), or a path on this site starting with /".into(),
            }));
        }
    }
    repo::confirm(&state.pool, id, item, &user.0.email, link).await?;
    Ok(Ok(Redirect::to(&format!("/briefs/{id}#readiness")).into_response()))
}
