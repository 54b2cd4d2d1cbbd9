//! Pages for people and teams: the admin's users and teams page (add, change role, disable or
//! enable, unlock, reset a password, a person's tokens, make teams and their members), a brief's
//! sharing page (its owner and teams), and a person's own account page (change password, their
//! sign-in activity and tokens, sign out everywhere).

use askama::Template;
use axum::{
    extract::{ConnectInfo, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use serde_json::json;

use std::net::SocketAddr;

use crate::{
    audit,
    auth::{
        lockout, session,
        teams::{self, Team},
        token,
        users::{self, Change},
        Role,
    },
    briefs::service as briefs,
    error::AppError,
    ids::{BriefId, TeamId, TokenId, UserId},
    people::service as people,
    state::AppState,
    trials::service as trials,
    web::{
        auth::{client_ip, CsrfForm, PageUser},
        extract::{ApiQuery, BriefPath, Path},
        once,
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/users", get(users_page).post(add_user))
        .route("/admin/users/{uid}/role", post(set_role))
        .route("/admin/users/{uid}/disable", post(disable))
        .route("/admin/users/{uid}/enable", post(enable))
        .route("/admin/users/{uid}/password", post(reset_password))
        .route("/admin/users/{uid}/unlock", post(unlock))
        .route("/admin/users/{uid}/tokens", get(person_tokens_page))
        .route("/admin/users/{uid}/tokens/{jti}/revoke", post(admin_revoke_token))
        .route("/admin/teams", post(add_team))
        .route("/admin/teams/{tid}/members", post(add_member))
        .route("/admin/teams/{tid}/members/{uid}/remove", post(remove_member))
        .route("/briefs/{id}/sharing", get(sharing_page))
        .route("/briefs/{id}/sharing/teams", post(share))
        .route("/briefs/{id}/sharing/teams/{tid}/remove", post(unshare))
        .route("/briefs/{id}/sharing/owner", post(set_owner))
        .route("/account", get(account_page))
        .route("/account/password", post(change_password))
        .route("/account/tokens/{jti}/revoke", post(own_revoke_token))
        .route("/account/sign-out-everywhere", post(sign_out_everywhere))
}

struct UserLine {
    id: String,
    email: String,
    role: String,
    disabled: bool,
    /// When sign-ins locked it (`lockout`), until an admin unlocks it.
    locked: Option<String>,
    created: String,
}

#[derive(Template)]
#[template(path = "people/users.html")]
struct UsersPage {
    ctx: PageContext,
    users: Vec<UserLine>,
    teams: Vec<Team>,
    unowned: Vec<(BriefId, String)>,
    /// A password to show once: (email, password, "Created" or "New password for").
    shown: Option<(String, String, &'static str)>,
    error: String,
    /// The "add a user" form: empty, or as typed with its message at the field.
    add: AddUserForm,
}

/// The "add a user" form as the admin typed it, and the message of each field refused.
#[derive(Default)]
struct AddUserForm {
    email: String,
    role: String,
    errors: std::collections::BTreeMap<String, String>,
}

impl AddUserForm {
    fn error(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }
}

async fn users_view(
    state: &AppState,
    user: &PageUser,
    shown: Option<(String, String, &'static str)>,
    error: String,
) -> PageResult<Response> {
    users_view_with(state, user, shown, error, AddUserForm::default()).await
}

async fn users_view_with(
    state: &AppState,
    user: &PageUser,
    shown: Option<(String, String, &'static str)>,
    error: String,
    add: AddUserForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let locked: std::collections::HashMap<String, chrono::DateTime<chrono::Utc>> =
        lockout::locked(&state.pool).await?.into_iter().collect();
    let users = users::list(&state.pool)
        .await?
        .into_iter()
        .map(|u| UserLine {
            id: u.id.to_string(),
            locked: locked.get(&u.email).map(|at| when(*at)),
            email: u.email,
            role: u.role.as_str().to_owned(),
            disabled: u.disabled_at.is_some(),
            created: u.created_at.format("%Y-%m-%d").to_string(),
        })
        .collect();
    render(&UsersPage {
        ctx: user.into(),
        users,
        teams: teams::list_teams(&state.pool).await?,
        unowned: briefs::newest_not_in(&state.pool, &teams::owned_briefs(&state.pool).await?, 200).await?,
        shown,
        error,
        add,
    })
}

/// The page again with a message, answered 422 (or 409 for a conflict) so tools see the refusal.
async fn users_refused(state: &AppState, user: &PageUser, e: AppError) -> PageResult<Response> {
    let (status, message) = match e {
        AppError::Validation(errors) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            errors
                .iter()
                .map(|e| format!("{}: {}", field_label(&e.field), e.message))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        AppError::Conflict(m) => (StatusCode::CONFLICT, m),
        AppError::NotFound(what) => (StatusCode::NOT_FOUND, format!("no such {what}")),
        other => return Err(PageError(other)),
    };
    let mut r = users_view(state, user, None, message).await?;
    *r.status_mut() = status;
    Ok(r)
}

/// How the page names a field in a message ("Email", not `email`).
fn field_label(field: &str) -> String {
    crate::criteria::capitalized(&field.replace('_', " "))
}

/// The users page again with the "add a user" form as typed and the refusal at its field (a
/// taken email at the email), answered 422 or 409.
async fn add_user_refused(
    state: &AppState,
    user: &PageUser,
    form: &std::collections::HashMap<String, String>,
    e: AppError,
) -> PageResult<Response> {
    let mut add = AddUserForm {
        email: form.get("email").cloned().unwrap_or_default(),
        role: form.get("role").cloned().unwrap_or_default(),
        errors: Default::default(),
    };
    let status = match e {
        AppError::Validation(errors) => {
            for e in errors {
                add.errors.entry(e.field).or_insert(e.message);
            }
            StatusCode::UNPROCESSABLE_ENTITY
        }
        AppError::Conflict(m) => {
            add.errors.insert("email".into(), m);
            StatusCode::CONFLICT
        }
        other => return users_refused(state, user, other).await,
    };
    let mut r = users_view_with(state, user, None, String::new(), add).await?;
    *r.status_mut() = status;
    Ok(r)
}

/// Carries a generated password from the POST that made it to the users page, shown once there
/// (`web::once`: post/redirect/get, so a refresh resets nothing).
const PASSWORD_COOKIE: &str = "rentcheck_password";

fn show_password_once(state: &AppState, email: &str, password: &str, label: &str) -> PageResult<Response> {
    Ok(once::redirect(
        PASSWORD_COOKIE,
        "/admin/users",
        "",
        &[("email", email), ("password", password), ("label", label)],
        state.config.secure_cookies,
    )?)
}

async fn users_page(State(state): State<AppState>, user: PageUser, headers: HeaderMap) -> PageResult<Response> {
    let carried = once::read(&headers, PASSWORD_COOKIE);
    let shown = carried.as_ref().and_then(|f| {
        let label = match once::field(f, "label")? {
            "Created" => "Created",
            _ => "New password for",
        };
        Some((
            once::field(f, "email")?.to_owned(),
            once::field(f, "password")?.to_owned(),
            label,
        ))
    });
    let response = users_view(&state, &user, shown, String::new()).await?;
    Ok(if carried.is_some() {
        once::shown(response, PASSWORD_COOKIE, "/admin/users", state.config.secure_cookies)
    } else {
        response
    })
}

async fn add_user(State(state): State<AppState>, CsrfForm(user, form): CsrfForm) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let email = form.get("email").cloned().unwrap_or_default();
    let role = match users::person_role(form.get("role").map(String::as_str).unwrap_or("")) {
        Ok(role) => role,
        Err(m) => {
            let refused = AppError::Validation(vec![crate::validation::FieldError::new("role", m)]);
            return add_user_refused(&state, &user, &form, refused).await;
        }
    };
    let entry =
        |u: &users::UserRow| audit::Entry::new(&user.0.email, "user.add", &u.email, json!({ "role": role.as_str() }));
    match users::add(&state.pool, &email, role, None, entry).await {
        Ok((created, password)) => show_password_once(&state, &created.email, &password.unwrap_or_default(), "Created"),
        Err(e) => add_user_refused(&state, &user, &form, e).await,
    }
}

/// Applies an admin's change to a person and records it.
async fn apply_change(
    state: &AppState,
    admin: &PageUser,
    uid: UserId,
    change: Change,
    action: &'static str,
) -> PageResult<Response> {
    admin.require(Role::Admin)?;
    let entry = |changed: &users::UserRow| {
        audit::Entry::new(
            &admin.0.email,
            action,
            &changed.email,
            json!({ "role": change.role.map(|r| r.as_str()), "disabled": change.disabled }),
        )
    };
    match users::change(&state.pool, &state.slots.get::<token::Tokens>(), uid, change, entry).await {
        Ok(Some(_)) => Ok(Redirect::to("/admin/users").into_response()),
        Ok(None) => users_refused(state, admin, AppError::NotFound("user")).await,
        Err(e) => users_refused(state, admin, e).await,
    }
}

async fn set_role(
    State(state): State<AppState>,
    Path(uid): Path<UserId>,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let role = match users::person_role(form.get("role").map(String::as_str).unwrap_or("")) {
        Ok(r) => r,
        Err(m) => {
            return users_refused(
                &state,
                &user,
                AppError::Validation(vec![crate::validation::FieldError::new("role", m)]),
            )
            .await
        }
    };
    let change = Change {
        role: Some(role),
        disabled: None,
    };
    apply_change(&state, &user, uid, change, "user.role").await
}

async fn disable(
    State(state): State<AppState>,
    Path(uid): Path<UserId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    let change = Change {
        role: None,
        disabled: Some(true),
    };
    apply_change(&state, &user, uid, change, "user.disable").await
}

async fn enable(
    State(state): State<AppState>,
    Path(uid): Path<UserId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    let change = Change {
        role: None,
        disabled: Some(false),
    };
    apply_change(&state, &user, uid, change, "user.enable").await
}

/// A new generated password, shown once to the admin; the person's sessions end.
async fn reset_password(
    State(state): State<AppState>,
    Path(uid): Path<UserId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let Some(target) = users::by_id(&state.pool, uid).await? else {
        return users_refused(&state, &user, AppError::NotFound("user")).await;
    };
    let password = crate::secrets::random_token()[..24].to_owned();
    users::replace_password(
        &state.pool,
        &state.slots.get::<token::Tokens>(),
        uid,
        password.clone(),
        None,
        |replaced| replaced.audit_entry(&user.0.email, &target.email, "admin"),
    )
    .await?;
    show_password_once(&state, &target.email, &password, "New password for")
}

/// Lifts the lock failed sign-ins put on an account, and clears its failures.
async fn unlock(
    State(state): State<AppState>,
    Path(uid): Path<UserId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let Some(target) = users::by_id(&state.pool, uid).await? else {
        return users_refused(&state, &user, AppError::NotFound("user")).await;
    };
    if lockout::unlock(&state.pool, &target.email).await? {
        audit::record(&state.pool, &user.0.email, "login.unlock", &target.email, json!({})).await?;
    }
    Ok(Redirect::to("/admin/users").into_response())
}

fn when(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// A token as a person's token list shows it.
struct PersonTokenLine {
    jti: String,
    name: String,
    role: String,
    /// (brief id, brief name) of a token limited to one brief.
    brief: Option<(String, String)>,
    created: String,
    expires: String,
    last_used: String,
    state: &'static str,
}

async fn person_token_lines(state: &AppState, uid: UserId) -> PageResult<Vec<PersonTokenLine>> {
    let rows = token::list_for_user(&state.pool, uid).await?;
    let mut lines = Vec::with_capacity(rows.len());
    for t in rows {
        let brief = match t.brief_id {
            Some(id) => Some((
                id.to_string(),
                briefs::name(&state.pool, id).await.unwrap_or_else(|_| id.to_string()),
            )),
            None => None,
        };
        lines.push(PersonTokenLine {
            jti: t.jti.to_string(),
            name: t.name.clone(),
            role: t.role.clone(),
            brief,
            created: when(t.created_at),
            expires: when(t.expires_at),
            last_used: t.last_used_at.map(when).unwrap_or_else(|| "never".into()),
            state: token::state_of(&t),
        });
    }
    Ok(lines)
}

#[derive(Template)]
#[template(path = "people/person_tokens.html")]
struct PersonTokensPage {
    ctx: PageContext,
    /// Where each token's revoke form posts (`{revoke_base}/{jti}/revoke`).
    revoke_base: String,
    email: String,
    tokens: Vec<PersonTokenLine>,
}

/// An admin's list of one person's tokens (their person tokens and the agent tokens they minted),
/// each revocable: what offboarding looks at.
async fn person_tokens_page(
    State(state): State<AppState>,
    user: PageUser,
    Path(uid): Path<UserId>,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let target = users::by_id(&state.pool, uid)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    render(&PersonTokensPage {
        ctx: (&user).into(),
        revoke_base: format!("/admin/users/{uid}/tokens"),
        email: target.email,
        tokens: person_token_lines(&state, uid).await?,
    })
}

/// Revokes one token of `owner`'s; 404 when it is not theirs.
async fn revoke_persons_token(state: &AppState, actor: &PageUser, owner: UserId, jti: TokenId) -> PageResult<()> {
    let owner_email = users::by_id(&state.pool, owner)
        .await?
        .ok_or(AppError::NotFound("user"))?
        .email;
    let row = token::get(&state.pool, jti)
        .await?
        .filter(|t| t.created_by == Some(owner))
        .ok_or(AppError::NotFound("token"))?;
    let entry = audit::Entry::new(
        &actor.0.email,
        "token.revoke",
        &owner_email,
        json!({ "jti": row.jti, "name": row.name, "brief": row.brief_id }),
    );
    token::revoke_audited(&state.pool, &state.slots.get::<token::Tokens>(), row.jti, entry).await?;
    Ok(())
}

async fn admin_revoke_token(
    State(state): State<AppState>,
    Path((uid, jti)): Path<(UserId, TokenId)>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    revoke_persons_token(&state, &user, uid, jti).await?;
    Ok(Redirect::to(&format!("/admin/users/{uid}/tokens")).into_response())
}

async fn own_revoke_token(
    State(state): State<AppState>,
    Path(jti): Path<TokenId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    revoke_persons_token(&state, &user, user.0.id, jti).await?;
    Ok(Redirect::to("/account#tokens").into_response())
}

async fn add_team(State(state): State<AppState>, CsrfForm(user, form): CsrfForm) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let name = form.get("name").map(String::as_str).unwrap_or("");
    match people::create_team(&state.pool, &user.0.email, name).await {
        Ok(_) => Ok(Redirect::to("/admin/users").into_response()),
        Err(e) => users_refused(&state, &user, e).await,
    }
}

async fn add_member(
    State(state): State<AppState>,
    Path(tid): Path<TeamId>,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    let team = match teams::team_by_id(&state.pool, tid).await {
        Ok(t) => t,
        Err(e) => return users_refused(&state, &user, e).await,
    };
    let email = users::normalize_email(form.get("email").map(String::as_str).unwrap_or("")).unwrap_or_default();
    let Some(member) = users::by_email(&state.pool, &email).await? else {
        return users_refused(&state, &user, AppError::NotFound("user")).await;
    };
    people::set_membership(&state.pool, &user.0.email, team.id, &member, true).await?;
    Ok(Redirect::to("/admin/users").into_response())
}

async fn remove_member(
    State(state): State<AppState>,
    Path((tid, uid)): Path<(TeamId, UserId)>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Admin)?;
    if let Some(member) = users::by_id(&state.pool, uid).await? {
        people::set_membership(&state.pool, &user.0.email, tid, &member, false).await?;
    }
    Ok(Redirect::to("/admin/users").into_response())
}

#[derive(Template)]
#[template(path = "people/sharing.html")]
struct SharingPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    owner: String,
    shared: Vec<teams::TeamRef>,
    /// Teams it is not shared with yet.
    others: Vec<teams::TeamRef>,
    /// May change who it is shared with (`teams::may_change_sharing`).
    may_edit: bool,
    /// No owner yet: only an admin changes its sharing.
    unowned: bool,
    is_admin: bool,
    error: String,
}

async fn sharing_view(state: &AppState, user: &PageUser, id: BriefId, error: String) -> PageResult<Response> {
    let brief = trials::load_brief(&state.pool, id).await?;
    let access = teams::brief_access(&state.pool, id).await?;
    let all = teams::list_teams(&state.pool).await?;
    let others = all
        .into_iter()
        .filter(|t| !access.teams.iter().any(|s| s.id == t.id))
        .map(|t| teams::TeamRef { id: t.id, name: t.name })
        .collect();
    let may_edit = match teams::may_change_sharing(&state.pool, &user.principal(), id).await {
        Ok(()) => true,
        Err(AppError::Forbidden(_)) => false,
        Err(e) => return Err(e.into()),
    };
    let unowned = access.owner.is_none();
    render(&SharingPage {
        ctx: user.into(),
        brief_id: id.to_string(),
        brief_name: brief.fields.name,
        owner: access
            .owner_email
            .clone()
            .unwrap_or_else(|| "nobody yet (every engineer may edit it)".into()),
        shared: access.teams,
        others,
        may_edit,
        unowned,
        is_admin: user.0.role == Role::Admin,
        error,
    })
}

async fn sharing_page(
    State(state): State<AppState>,
    user: PageUser,
    BriefPath { id }: BriefPath,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    sharing_view(&state, &user, id, String::new()).await
}

async fn share(
    State(state): State<AppState>,
    BriefPath { id }: BriefPath,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    teams::may_change_sharing(&state.pool, &user.principal(), id).await?;
    let Some(team) = form.get("team").and_then(|t| t.trim().parse::<TeamId>().ok()) else {
        let mut r = sharing_view(&state, &user, id, "Pick a team.".into()).await?;
        *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
        return Ok(r);
    };
    let team = teams::team_by_id(&state.pool, team).await?;
    people::share(&state.pool, &user.0.email, id, &team).await?;
    Ok(Redirect::to(&format!("/briefs/{id}/sharing")).into_response())
}

async fn unshare(
    State(state): State<AppState>,
    Path((id, tid)): Path<(BriefId, TeamId)>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    teams::may_change_sharing(&state.pool, &user.principal(), id).await?;
    people::unshare(&state.pool, &user.0.email, id, tid).await?;
    Ok(Redirect::to(&format!("/briefs/{id}/sharing")).into_response())
}

/// Admins assign a brief's owner (briefs from before ownership have none).
async fn set_owner(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    let id = path.id;
    user.require(Role::Admin)?;
    path.load(&state).await?;
    let email = users::normalize_email(form.get("email").map(String::as_str).unwrap_or("")).unwrap_or_default();
    let Some(owner) = users::by_email(&state.pool, &email).await? else {
        let mut r = sharing_view(&state, &user, id, format!("There is no user {email}.")).await?;
        *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
        return Ok(r);
    };
    people::set_owner(&state.pool, &user.0.email, id, &owner).await?;
    Ok(Redirect::to(&format!("/briefs/{id}/sharing")).into_response())
}

/// One line of an account's sign-in activity.
struct ActivityLine {
    at: String,
    what: String,
    client: String,
}

fn activity_line(e: &audit::AuditEntry) -> ActivityLine {
    let detail = |k: &str| e.details.0.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
    let what = match e.action.as_str() {
        "login.failed" => "a sign-in with a wrong password".to_owned(),
        "login.refused" => "sign-ins refused while throttled".to_owned(),
        "login.lock" => "the account was locked after too many failed sign-ins".to_owned(),
        "login.unlock" => format!("the account was unlocked by {}", e.actor),
        "user.password.refused" => "a wrong current password when changing the password".to_owned(),
        other => other.to_owned(),
    };
    ActivityLine {
        at: when(e.at),
        what,
        client: detail("client"),
    }
}

#[derive(Template)]
#[template(path = "people/account.html")]
struct AccountPage {
    ctx: PageContext,
    email: String,
    teams: Vec<String>,
    message: String,
    error: String,
    idle_minutes: i64,
    max_hours: i64,
    /// When failed sign-ins locked the account (for browsers it never signed in with).
    locked: Option<String>,
    /// The newest failed, refused and locking sign-ins.
    activity: Vec<ActivityLine>,
    /// Where the sign-in was going, when it came here first to tell of failed sign-ins.
    next: Option<String>,
    tokens: Vec<PersonTokenLine>,
    revoke_base: &'static str,
}

async fn account_view(
    state: &AppState,
    user: &PageUser,
    message: String,
    error: String,
    next: Option<String>,
) -> PageResult<Response> {
    let teams = teams::list_teams(&state.pool)
        .await?
        .into_iter()
        .filter(|t| t.members.contains(&user.0.email))
        .map(|t| t.name)
        .collect();
    let locked = lockout::state(&state.pool, &user.0.email)
        .await?
        .and_then(|s| s.locked_at)
        .map(when);
    let activity = audit::sign_in_activity(&state.pool, &user.0.email, 10)
        .await?
        .iter()
        .map(activity_line)
        .collect();
    render(&AccountPage {
        ctx: user.into(),
        email: user.0.email.clone(),
        teams,
        message,
        error,
        idle_minutes: state.config.sessions.idle.num_minutes(),
        max_hours: state.config.sessions.absolute.num_hours(),
        locked,
        activity,
        next,
        tokens: person_token_lines(state, user.0.id).await?,
        revoke_base: "/account/tokens",
    })
}

#[derive(serde::Deserialize)]
struct AccountQuery {
    next: Option<String>,
}

async fn account_page(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<AccountQuery>,
) -> PageResult<Response> {
    let next = q
        .next
        .map(|n| crate::web::auth::safe_next(Some(&n)))
        .filter(|n| n != "/account");
    account_view(&state, &user, String::new(), String::new(), next).await
}

/// A person changes their own password: the current one first (throttled and audited as a
/// sign-in is); their other sessions end and their tokens are revoked.
async fn change_password(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    let current = form.get("current_password").cloned().unwrap_or_default();
    let new = form.get("new_password").cloned().unwrap_or_default();
    let refuse = |status: StatusCode, error: String| {
        let state = state.clone();
        let user = user.clone();
        async move {
            let mut r = account_view(&state, &user, String::new(), error, None).await?;
            *r.status_mut() = status;
            PageResult::Ok(r)
        }
    };
    let row = users::by_id(&state.pool, user.0.id)
        .await?
        .ok_or(AppError::NotFound("user"))?;
    let client = client_ip(&headers, peer.ip(), &state.config.trusted_proxies).to_string();
    match super::api::recheck_password(&state, &user.0.email, &row, &client, current).await {
        Ok(()) => {}
        Err(AppError::Validation(_)) => {
            return refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                "current_password is not your password".into(),
            )
            .await
        }
        Err(AppError::TooManyRequests(message)) => return refuse(StatusCode::TOO_MANY_REQUESTS, message).await,
        Err(e) => return Err(e.into()),
    }
    let keep = session::read_cookie(&headers, session::COOKIE);
    match users::replace_password(
        &state.pool,
        &state.slots.get::<token::Tokens>(),
        user.0.id,
        new,
        keep.as_deref(),
        |replaced| replaced.audit_entry(&user.0.email, &user.0.email, "self"),
    )
    .await
    {
        Ok(replaced) => {
            let tokens = match replaced.tokens_revoked {
                0 => String::new(),
                1 => " and your one token was revoked".into(),
                n => format!(" and your {n} tokens were revoked"),
            };
            account_view(
                &state,
                &user,
                format!("Password changed; your other sessions have ended{tokens}."),
                String::new(),
                None,
            )
            .await
        }
        Err(AppError::Validation(errors)) => {
            let message = errors
                .iter()
                .map(|e| format!("new_password {}", e.message))
                .collect::<Vec<_>>()
                .join("; ");
            refuse(StatusCode::UNPROCESSABLE_ENTITY, message).await
        }
        Err(e) => Err(PageError(e)),
    }
}

/// Ends every session of this person, this one included.
async fn sign_out_everywhere(State(state): State<AppState>, CsrfForm(user, _): CsrfForm) -> PageResult<Response> {
    let ended = session::delete_for_user(&state.pool, user.0.id, None).await?;
    audit::record(
        &state.pool,
        &user.0.email,
        "logout.everywhere",
        &user.0.email,
        json!({ "sessions": ended }),
    )
    .await?;
    let mut response = Redirect::to("/login").into_response();
    if let Ok(v) = session::clear_cookie(session::COOKIE, state.config.secure_cookies).parse() {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(response)
}
