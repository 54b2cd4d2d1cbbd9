//! The admins' webhooks page: add a webhook, remove one, and see each one's newest deliveries with
//! every attempt and the answer it got.

use std::collections::HashMap;

use askama::Template;
use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use serde_json::{json, Value};

use super::service::{self, WebhookView};
use crate::{
    auth::Role,
    error::AppError,
    ids::WebhookId,
    outbox::EVENTS,
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::Path,
        once,
        page::{render, PageContext, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/webhooks", get(page).post(add))
        .route("/admin/webhooks/{wid}/delete", post(remove))
}

#[derive(Template)]
#[template(path = "signals/webhooks.html")]
struct WebhooksPage {
    ctx: PageContext,
    hooks: Vec<WebhookView>,
    events: [&'static str; EVENTS.len()],
    /// A generated secret to show once: (url, secret).
    shown: Option<(String, String)>,
    error: String,
    /// The form as sent, when it was refused.
    url: String,
    checked: Vec<String>,
}

async fn view(
    state: &AppState,
    user: &PageUser,
    shown: Option<(String, String)>,
    error: String,
    form: Option<&HashMap<String, String>>,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let hooks = service::list(state, &user.principal()).await?;
    let (url, checked) = match form {
        Some(f) => (f.get("url").cloned().unwrap_or_default(), checked_events(f)),
        None => (String::new(), EVENTS.iter().map(|e| (*e).to_owned()).collect()),
    };
    let mut r = render(&WebhooksPage {
        ctx: user.into(),
        hooks,
        events: EVENTS,
        shown,
        error,
        url,
        checked,
    })?;
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// One checkbox per event, named `event.<kind>` (a form map keeps one value per name).
fn checked_events(form: &HashMap<String, String>) -> Vec<String> {
    EVENTS
        .iter()
        .filter(|e| form.contains_key(&format!("event.{e}")))
        .map(|e| (*e).to_owned())
        .collect()
}

/// Carries a new webhook's URL and generated secret from the POST that added it to the page that
/// shows the secret once (`web::once`: post/redirect/get, so a refresh adds nothing).
const ADDED_COOKIE: &str = "rentcheck_webhook_added";

async fn page(State(state): State<AppState>, user: PageUser, headers: HeaderMap) -> PageResult<Response> {
    let carried = once::read(&headers, ADDED_COOKIE);
    let shown = carried
        .as_ref()
        .and_then(|f| Some((once::field(f, "url")?.to_owned(), once::field(f, "secret")?.to_owned())));
    let response = view(&state, &user, shown, String::new(), None).await?;
    Ok(if carried.is_some() {
        once::shown(response, ADDED_COOKIE, "/admin/webhooks", state.config.secure_cookies)
    } else {
        response
    })
}

async fn add(State(state): State<AppState>, CsrfForm(user, form): CsrfForm) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let mut body = json!({
        "url": form.get("url").map(|u| u.trim()).unwrap_or(""),
        "events": checked_events(&form),
    });
    if let Some(secret) = form.get("secret").filter(|s| !s.trim().is_empty()) {
        body["secret"] = Value::String(secret.clone());
    }
    match service::create(&state, &user.principal(), &body).await {
        // Post/redirect/get: a refresh of the page that shows the secret adds no second webhook.
        Ok(created) => match created.generated_secret {
            Some(secret) => Ok(once::redirect(
                ADDED_COOKIE,
                "/admin/webhooks",
                "",
                &[("url", &created.row.url), ("secret", &secret)],
                state.config.secure_cookies,
            )?),
            None => Ok(Redirect::to("/admin/webhooks").into_response()),
        },
        Err(AppError::Validation(errors)) => {
            let message = errors
                .iter()
                .map(|e| format!("{} {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; ");
            let mut r = view(&state, &user, None, message, Some(&form)).await?;
            *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(r)
        }
        Err(e) => Err(e.into()),
    }
}

async fn remove(
    State(state): State<AppState>,
    Path(id): Path<WebhookId>,
    CsrfForm(user, _form): CsrfForm,
) -> PageResult<Response> {
    service::delete(&state, &user.principal(), id).await?;
    Ok(Redirect::to("/admin/webhooks").into_response())
}
