//! JSON API for people: `GET /api/v1/users`, `GET/PUT /api/v1/users/{uid}` (role, disabled;
//! admins) and `POST /api/v1/users/{uid}/password` (admins, or a person for their own password
//! with the current one).

use axum::{extract::State, routing::get, routing::post, Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::{
    password,
    users::{self, Change, UserRow},
    Principal, Role,
};
use crate::{
    audit,
    error::{ApiResult, AppError},
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/users", get(list))
        .route("/api/v1/users/{uid}", get(show).put(replace))
        .route("/api/v1/users/{uid}/password", post(set_password))
}

/// A person as the API shows them (never their hash).
#[derive(Serialize)]
pub struct UserView {
    id: Uuid,
    email: String,
    role: String,
    disabled: bool,
    disabled_at: Option<chrono::DateTime<chrono::Utc>>,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl From<UserRow> for UserView {
    fn from(u: UserRow) -> Self {
        Self {
            id: u.id,
            email: u.email,
            role: u.role,
            disabled: u.disabled_at.is_some(),
            disabled_at: u.disabled_at,
            created_at: u.created_at,
        }
    }
}

fn require_admin(caller: &Principal) -> Result<(), AppError> {
    caller.require_person(Role::Admin)?;
    caller.require_unscoped()
}

async fn list(State(state): State<AppState>, ApiCaller(caller): ApiCaller) -> ApiResult<Json<serde_json::Value>> {
    require_admin(&caller)?;
    let items: Vec<UserView> = users::list(&state.pool)
        .await?
        .into_iter()
        .map(UserView::from)
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// Admins see anyone; a person sees themselves.
async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(uid): Path<Uuid>,
) -> ApiResult<Json<UserView>> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    if caller.user_id() != Some(uid) {
        require_admin(&caller)?;
    }
    let user = users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    Ok(Json(user.into()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserChange {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    disabled: Option<bool>,
}

/// `PUT /api/v1/users/{uid}` `{ role?, disabled? }`: 200 with the person as now.
async fn replace(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(uid): Path<Uuid>,
    ApiJson(body): ApiJson<UserChange>,
) -> ApiResult<Json<UserView>> {
    require_admin(&caller)?;
    let role = match body.role.as_deref() {
        None => None,
        Some(r) => Some(users::person_role(r).map_err(|m| AppError::Validation(vec![FieldError::new("role", m)]))?),
    };
    if role.is_none() && body.disabled.is_none() {
        return Err(AppError::Validation(vec![FieldError::new(
            "role",
            "send role, disabled, or both",
        )]));
    }
    let change = Change {
        role,
        disabled: body.disabled,
    };
    let user = users::change(&state.pool, uid, change)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    audit::record(
        &state.pool,
        &caller.label(),
        "user.change",
        &user.email,
        json!({ "role": role.map(|r| r.as_str()), "disabled": body.disabled }),
    )
    .await?;
    Ok(Json(user.into()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PasswordChange {
    password: String,
    #[serde(default)]
    current_password: Option<String>,
}

/// `POST /api/v1/users/{uid}/password` `{ password, current_password? }`: an admin sets anyone's;
/// a person sets their own and must give the current one. Their sessions end. 204.
async fn set_password(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(uid): Path<Uuid>,
    ApiJson(body): ApiJson<PasswordChange>,
) -> ApiResult<axum::http::StatusCode> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    let own = caller.user_id() == Some(uid);
    if !own {
        require_admin(&caller)?;
    }
    let user = users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    if own {
        let current = body.current_password.unwrap_or_default();
        if !password::verify(current, Some(user.password_hash.clone())).await? {
            return Err(AppError::Validation(vec![FieldError::new(
                "current_password",
                "is not this person's password",
            )]));
        }
    }
    users::replace_password(&state.pool, uid, body.password, None).await?;
    audit::record(
        &state.pool,
        &caller.label(),
        "user.password",
        &user.email,
        json!({ "by": if own { "self" } else { "admin" } }),
    )
    .await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}
