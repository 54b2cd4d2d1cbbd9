//! The dashboard (`/`): every brief with its best sizing option, its computed decision, how many
//! required criteria pass, and its approval.

use askama::Template;
use axum::{extract::State, response::Response};

use crate::{
    briefs::service as briefs,
    review::{decision::Status, service as review_service},
    state::AppState,
    web::{
        auth::PageUser,
        page::{render, PageContext, PageResult},
    },
};

/// One row of the dashboard.
struct BriefRow {
    id: String,
    name: String,
    model: String,
    workload: &'static str,
    precision: &'static str,
    best_option: String,
    created: String,
    decision: &'static str,
    progress: String,
    approval: String,
}

#[derive(Template)]
#[template(path = "overview/dashboard.html")]
struct DashboardPage {
    ctx: PageContext,
    briefs: Vec<BriefRow>,
}

/// Briefs on the dashboard; each row computes its review (a few indexed queries).
const DASHBOARD_BRIEFS: i64 = 100;

pub async fn dashboard(State(state): State<AppState>, user: PageUser) -> PageResult<Response> {
    let briefs = briefs::list(&state.pool, DASHBOARD_BRIEFS).await?;
    let mut rows = Vec::with_capacity(briefs.len());
    for brief in briefs {
        let sizing = brief.fields.sizing();
        let best_option = sizing
            .options
            .iter()
            .find(|o| o.fits)
            .map(|o| format!("{} × {}", o.count, o.gpu))
            .unwrap_or_else(|| "no fit".to_owned());
        let (id, name, model, workload, precision, created) = (
            brief.id.to_string(),
            brief.fields.name.clone(),
            brief.fields.model_name.clone(),
            brief.fields.workload_kind.as_str(),
            brief.fields.precision.as_str(),
            brief.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        );
        let review = review_service::review_for(&state, brief).await?;
        let required: Vec<_> = review.context.inputs.criteria.iter().filter(|c| c.required).collect();
        let passed = required.iter().filter(|c| c.status == Status::Pass).count();
        rows.push(BriefRow {
            id,
            name,
            model,
            workload,
            precision,
            best_option,
            created,
            decision: review.decision.decision.as_str(),
            progress: format!("{passed}/{} required", required.len()),
            approval: match &review.approval {
                None => "awaiting review".to_owned(),
                // "rejected", never "reject" + "d".
                Some(a) if a.stale => format!("{} (stale)", past_tense(&a.row.verdict)),
                Some(a) => format!("{} {}", past_tense(&a.row.verdict), a.row.decision),
            },
        });
    }
    render(&DashboardPage {
        ctx: (&user).into(),
        briefs: rows,
    })
}

/// A verdict as done: "approve" → "approved", "reject" → "rejected".
fn past_tense(verdict: &str) -> &str {
    match verdict {
        "approve" => "approved",
        "reject" => "rejected",
        other => other,
    }
}
