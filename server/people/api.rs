//! JSON API for people: `GET /api/v1/users`, `GET/PUT /api/v1/users/{uid}` (role, disabled,
//! unlock; admins), `POST /api/v1/users/{uid}/password` (admins, or a person for their own password
//! with the current one) and `GET /api/v1/users/{uid}/tokens`, `DELETE …/tokens/{jti}` (a person's
//! tokens; admins, or the person).

use std::net::SocketAddr;

use axum::{
    extract::ConnectInfo,
    http::{HeaderMap, StatusCode},
    Json,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    audit,
    auth::{
        lockout, password,
        token::{self, TokenRow},
        users::{self, Change, UserRow},
        Principal, Role,
    },
    error::{ApiResult, AppError},
    ids::{TokenId, UserId},
    state::AppState,
    validation::FieldError,
    web::{
        auth::{client_ip, ApiCall},
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(show, replace))
        .routes(routes!(set_password))
        .routes(routes!(list_tokens))
        .routes(routes!(revoke_token))
}

/// A person as the API shows them (never their hash).
#[derive(Serialize, ToSchema)]
pub struct UserView {
    #[schema(value_type = Uuid)]
    id: UserId,
    /// lower-case
    email: String,
    /// engineer, manager or admin
    role: String,
    /// a disabled person cannot sign in; their tokens are refused
    disabled: bool,
    disabled_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Locked after too many failed sign-ins (`auth::lockout`), until an admin unlocks it.
    locked: bool,
    locked_at: Option<chrono::DateTime<chrono::Utc>>,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl UserView {
    fn new(u: UserRow, locked_at: Option<chrono::DateTime<chrono::Utc>>) -> Self {
        Self {
            id: u.id,
            email: u.email,
            role: u.role.as_str().to_owned(),
            disabled: u.disabled_at.is_some(),
            disabled_at: u.disabled_at,
            locked: locked_at.is_some(),
            locked_at,
            created_at: u.created_at,
        }
    }

    async fn load(state: &AppState, u: UserRow) -> Result<Self, AppError> {
        let locked_at = lockout::state(&state.pool, &u.email).await?.and_then(|s| s.locked_at);
        Ok(Self::new(u, locked_at))
    }
}

fn require_admin(caller: &Principal) -> Result<(), AppError> {
    caller.require_person(Role::Admin)?;
    caller.require_unscoped()
}

/// Every person, by email.
#[derive(Serialize, ToSchema)]
struct UserList {
    items: Vec<UserView>,
}

/// Every token minted by or for a person, newest first.
#[derive(Serialize, ToSchema)]
struct TokenList {
    items: Vec<TokenView>,
}

#[utoipa::path(
    get,
    path = "/api/v1/users",
    operation_id = "listUsers",
    tag = "users",
    summary = "Every person, by email (admins)",
    responses((status = 200, description = "{ items: [user] }", body = UserList))
)]
async fn list(ApiCall { state, caller }: ApiCall) -> ApiResult<Json<UserList>> {
    require_admin(&caller)?;
    let locked: std::collections::HashMap<String, chrono::DateTime<chrono::Utc>> =
        lockout::locked(&state.pool).await?.into_iter().collect();
    let items: Vec<UserView> = users::list(&state.pool)
        .await?
        .into_iter()
        .map(|u| {
            let at = locked.get(&u.email).copied();
            UserView::new(u, at)
        })
        .collect();
    let answer = UserList { items };
    Ok(Json(answer))
}

/// Admins see anyone; a person sees themselves.
#[utoipa::path(
    get,
    path = "/api/v1/users/{uid}",
    operation_id = "getUser",
    tag = "users",
    summary = "One person (admins, or the person themselves)",
    params(("uid" = Uuid, Path, description = "the person's id")),
    responses(
        (status = 200, description = "the person", body = UserView),
        (status = 404, description = "no such person"),
    )
)]
async fn show(ApiCall { state, caller }: ApiCall, Path(uid): Path<UserId>) -> ApiResult<Json<UserView>> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    if caller.user_id() != Some(uid) {
        require_admin(&caller)?;
    }
    let user = users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    Ok(Json(UserView::load(&state, user).await?))
}

/// What changes; at least one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UserChange {
    /// engineer, manager or admin
    #[serde(default)]
    role: Option<String>,
    /// true disables, false enables
    #[serde(default)]
    disabled: Option<bool>,
    /// `false` unlocks an account locked after failed sign-ins.
    #[serde(default)]
    locked: Option<bool>,
}

/// `PUT /api/v1/users/{uid}` `{ role?, disabled? }`: 200 with the person as now.
#[utoipa::path(
    put,
    path = "/api/v1/users/{uid}",
    operation_id = "replaceUser",
    tag = "users",
    summary = "Change a person's role and/or disabled mark, or unlock them (admins). Disabling ends their sessions and revokes their tokens at once (enabling again revives none); a lower role refuses their tokens of a higher one; locked: false lifts a sign-in lock",
    params(("uid" = Uuid, Path, description = "the person's id")),
    request_body = UserChange,
    responses(
        (status = 200, description = "the person as now", body = UserView),
        (status = 404, description = "no such person"),
        (status = 409, description = "it would leave no enabled admin"),
        (status = 422, description = "an unknown role, or nothing to change"),
    )
)]
async fn replace(
    ApiCall { state, caller }: ApiCall,
    Path(uid): Path<UserId>,
    ApiJson(body): ApiJson<UserChange>,
) -> ApiResult<Json<UserView>> {
    require_admin(&caller)?;
    let role = match body.role.as_deref() {
        None => None,
        Some(r) => Some(users::person_role(r).map_err(|m| AppError::Validation(vec![FieldError::new("role", m)]))?),
    };
    if body.locked == Some(true) {
        return Err(AppError::Validation(vec![FieldError::new(
            "locked",
            "may only be false (unlock): accounts are locked by failed sign-ins, not by hand; disable it instead",
        )]));
    }
    if role.is_none() && body.disabled.is_none() && body.locked.is_none() {
        return Err(AppError::Validation(vec![FieldError::new(
            "role",
            "send role, disabled or locked (false), or several",
        )]));
    }
    let user = if role.is_some() || body.disabled.is_some() {
        let change = Change {
            role,
            disabled: body.disabled,
        };
        let entry = |changed: &users::UserRow| {
            audit::Entry::new(
                &caller.label(),
                "user.change",
                &changed.email,
                json!({ "role": role.map(|r| r.as_str()), "disabled": body.disabled }),
            )
        };
        users::change(&state.pool, &state.slots.get::<token::Tokens>(), uid, change, entry)
            .await?
            .ok_or(AppError::NotFound("user"))?
    } else {
        users::by_id(&state.pool, uid)
            .await?
            .ok_or(AppError::NotFound("user"))?
    };
    if body.locked == Some(false) && lockout::unlock(&state.pool, &user.email).await? {
        audit::record(&state.pool, &caller.label(), "login.unlock", &user.email, json!({})).await?;
    }
    Ok(Json(UserView::load(&state, user).await?))
}

/// The new password.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PasswordChange {
    /// 12 to 256 characters
    #[schema(min_length = 12, max_length = 256)]
    password: String,
    /// required when changing your own
    #[serde(default)]
    current_password: Option<String>,
}

/// `POST /api/v1/users/{uid}/password` `{ password, current_password? }`: an admin sets anyone's;
/// a person sets their own and must give the current one. Their sessions end. 204.
#[utoipa::path(
    post,
    path = "/api/v1/users/{uid}/password",
    operation_id = "setUserPassword",
    tag = "users",
    summary = "Set a person's password: admins for anyone, a person for themselves with the current one (throttled as sign-ins are). Their sessions end and every token minted by or for them is revoked",
    params(("uid" = Uuid, Path, description = "the person's id")),
    request_body = PasswordChange,
    responses(
        (status = 204, description = "changed"),
        (status = 404, description = "no such person"),
        (status = 422, description = "too short or long, or a wrong current_password"),
        (status = 429, description = "too many wrong current passwords lately: wait, or the account is locked"),
    )
)]
async fn set_password(
    ApiCall { state, caller }: ApiCall,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(uid): Path<UserId>,
    ApiJson(body): ApiJson<PasswordChange>,
) -> ApiResult<StatusCode> {
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
        // Whoever holds a session or token must still know the password, and may guess it no
        // faster than at the sign-in form (`recheck_password`).
        let client = client_ip(&headers, peer.ip(), &state.config.trusted_proxies).to_string();
        let current = body.current_password.unwrap_or_default();
        recheck_password(&state, &caller.label(), &user, &client, current).await?;
    }
    let by = if own { "self" } else { "admin" };
    users::replace_password(
        &state.pool,
        &state.slots.get::<token::Tokens>(),
        uid,
        body.password,
        None,
        |replaced| replaced.audit_entry(&caller.label(), &user.email, by),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The current-password check before a person changes their own password (API and account page):
/// the sign-in throttle (`lockout`, as a browser that never signed in) and the audit log, as at
/// the sign-in form. 429 while throttled, 422 at `current_password` when wrong.
pub async fn recheck_password(
    state: &AppState,
    actor: &str,
    user: &UserRow,
    client: &str,
    current: String,
) -> Result<(), AppError> {
    let attempt = match lockout::admit(&state.pool, &user.email, client, None).await? {
        lockout::Admission::Go(attempt) => attempt,
        refused => {
            audit::record_refusal(
                &state.pool,
                &state.refusals,
                actor,
                "user.password.refused",
                &user.email,
                client,
                json!({ "reason": refused.reason() }),
            )
            .await?;
            return Err(AppError::TooManyRequests(refused.message()));
        }
    };
    let ok = password::verify(current, Some(user.password_hash.clone())).await?;
    let settled = lockout::settle(&state.pool, attempt, ok, false).await?;
    if ok {
        return Ok(());
    }
    audit::record(
        &state.pool,
        actor,
        "user.password.refused",
        &user.email,
        json!({ "reason": "wrong-current-password", "client": client }),
    )
    .await?;
    if settled.locked_now {
        audit::record(
            &state.pool,
            "rentcheck",
            "login.lock",
            &user.email,
            json!({ "failures": lockout::LOCK_AFTER, "client": client }),
        )
        .await?;
    }
    Err(AppError::Validation(vec![FieldError::new(
        "current_password",
        "is not this person's password",
    )]))
}

/// A token as a person's token list shows it: jti, name, subject, role, brief_id, trial_id,
/// created_by, created_at, expires_at, last_used_at, revoked_at and its state. Never the token.
#[derive(Serialize, ToSchema)]
#[schema(as = Token)]
struct TokenView {
    #[serde(flatten)]
    token: TokenRow,
    /// active, expired or revoked
    state: &'static str,
}

/// Admins see anyone's; a person sees their own.
fn may_see_tokens(caller: &Principal, uid: UserId) -> Result<(), AppError> {
    caller.require_person(Role::Engineer)?;
    caller.require_unscoped()?;
    if caller.user_id() != Some(uid) {
        require_admin(caller)?;
    }
    Ok(())
}

/// `GET /api/v1/users/{uid}/tokens`: every token minted by or for the person, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/users/{uid}/tokens",
    operation_id = "listUserTokens",
    tag = "users",
    summary = "Every token minted by or for a person, newest first: their own tokens and the agent tokens they minted (admins, or the person themselves)",
    params(("uid" = Uuid, Path, description = "the person's id")),
    responses(
        (status = 200, description = "{ items: [token] }", body = TokenList),
        (status = 404, description = "no such person"),
    )
)]
async fn list_tokens(ApiCall { state, caller }: ApiCall, Path(uid): Path<UserId>) -> ApiResult<Json<TokenList>> {
    may_see_tokens(&caller, uid)?;
    users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    let items: Vec<TokenView> = token::list_for_user(&state.pool, uid)
        .await?
        .into_iter()
        .map(|t| TokenView {
            state: token::state_of(&t),
            token: t,
        })
        .collect();
    let answer = TokenList { items };
    Ok(Json(answer))
}

/// `DELETE /api/v1/users/{uid}/tokens/{jti}`: revokes one of the person's tokens. 204; 404 when it
/// is not theirs.
#[utoipa::path(
    delete,
    path = "/api/v1/users/{uid}/tokens/{jti}",
    operation_id = "revokeUserToken",
    tag = "users",
    summary = "Revoke one of a person's tokens: refused at once from then on (admins, or the person themselves)",
    params(
        ("uid" = Uuid, Path, description = "the person's id"),
        ("jti" = Uuid, Path, description = "the token's id"),
    ),
    responses(
        (status = 204, description = "revoked"),
        (status = 404, description = "no such token of this person"),
    )
)]
async fn revoke_token(
    ApiCall { state, caller }: ApiCall,
    Path((uid, jti)): Path<(UserId, TokenId)>,
) -> ApiResult<StatusCode> {
    may_see_tokens(&caller, uid)?;
    let user = users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    let row = token::get(&state.pool, jti)
        .await?
        .filter(|t| t.created_by == Some(uid))
        .ok_or(AppError::NotFound("token"))?;
    let entry = audit::Entry::new(
        &caller.label(),
        "token.revoke",
        &user.email,
        json!({ "jti": row.jti, "name": row.name, "brief": row.brief_id }),
    );
    token::revoke_audited(&state.pool, &state.slots.get::<token::Tokens>(), row.jti, entry).await?;
    Ok(StatusCode::NO_CONTENT)
}
