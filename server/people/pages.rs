//! Sign-in pages, the first-run setup page, per-brief token pages and user administration.

use std::{collections::HashMap, net::SocketAddr};

use askama::Template;
use axum::{
    extract::{ConnectInfo, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use chrono::Duration;
use serde::Deserialize;
use serde_json::json;

use crate::{
    audit,
    auth::{
        lockout::{self, Admission},
        password, session, teams,
        token::{self, NewToken, TokenRow},
        users, Role,
    },
    error::AppError,
    ids::{BriefId, TokenId, TrialId},
    secrets,
    state::AppState,
    trials::service as trials,
    web::{
        auth::{client_ip, csrf_failure, from_this_machine, safe_next, CsrfForm, PageUser, CSRF_FIELD},
        extract::{ApiQuery, BriefPath, HtmlForm, Path},
        once,
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/login", get(login_form).post(login))
        .route("/logout", post(logout))
        .route("/setup", get(setup_form).post(setup))
        .route("/briefs/{id}/tokens", get(tokens_page).post(mint_token))
        .route("/briefs/{id}/tokens/{jti}/revoke", post(revoke_token))
        .merge(super::admin::routes())
}

/// Pre-session CSRF for the login and setup forms: a random value in a cookie and in the form.
const LOGIN_CSRF_COOKIE: &str = "rentcheck_login_csrf";

#[derive(Template)]
#[template(path = "people/login.html")]
struct LoginPage {
    ctx: PageContext,
    csrf: String,
    next: String,
    email: String,
    message: String,
    first_run: bool,
}

#[derive(Deserialize)]
struct NextParam {
    next: Option<String>,
}

async fn login_page(state: &AppState, email: String, next: String, message: String) -> PageResult<Response> {
    let csrf = secrets::random_token();
    let first_run = users::count(&state.pool).await? == 0;
    let mut response = render(&LoginPage {
        ctx: PageContext::anonymous(),
        csrf: csrf.clone(),
        next,
        email,
        message,
        first_run,
    })?;
    set_login_csrf_cookie(state, &mut response, &csrf);
    Ok(response)
}

async fn login_form(State(state): State<AppState>, ApiQuery(q): ApiQuery<NextParam>) -> PageResult<Response> {
    login_page(&state, String::new(), safe_next(q.next.as_deref()), String::new()).await
}

/// Pairs a pre-session form's CSRF value with a cookie (double submit), for 2 hours.
fn set_login_csrf_cookie(state: &AppState, response: &mut Response, csrf: &str) {
    let cookie = session::set_cookie(LOGIN_CSRF_COOKIE, csrf, Duration::hours(2), state.config.secure_cookies);
    if let Ok(v) = cookie.parse() {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn pre_session_csrf_ok(headers: &HeaderMap, form: &HashMap<String, String>) -> bool {
    let cookie = session::read_cookie(headers, LOGIN_CSRF_COOKIE).unwrap_or_default();
    let sent = form.get(CSRF_FIELD).map(String::as_str).unwrap_or("");
    !cookie.is_empty() && secrets::equal(&cookie, sent)
}

/// The sign-in, in the order its security rules need: throttle, check, settle, session, audit.
async fn login(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    HtmlForm(form): HtmlForm<HashMap<String, String>>,
) -> PageResult<Response> {
    if !pre_session_csrf_ok(&headers, &form) {
        return Ok(csrf_failure());
    }
    let next = safe_next(form.get("next").map(String::as_str));
    let raw_email = form.get("email").cloned().unwrap_or_default();
    let email = raw_email.trim().to_lowercase();
    let password = form.get("password").cloned().unwrap_or_default();
    let client = client_ip(&headers, peer.ip(), &state.config.trusted_proxies).to_string();

    // The attempt is counted before the password is checked (see `lockout`), and the answers are
    // the same whether or not the email exists: no user enumeration.
    let device = session::read_cookie(&headers, lockout::DEVICE_COOKIE);
    let attempt = match lockout::admit(&state.pool, &email, &client, device.as_deref()).await? {
        Admission::Go(attempt) => attempt,
        refused => return refused_page(&state, refused, &email, &client, raw_email, next).await,
    };
    let user = users::by_email(&state.pool, &email).await?;
    let ok = password::verify(password, user.as_ref().map(|u| u.password_hash.clone())).await?;
    // A browser that signed in is remembered for this account (not for a disabled one).
    let remember = ok && user.as_ref().is_some_and(|u| u.disabled_at.is_none());
    let settled = lockout::settle(&state.pool, attempt, ok, remember).await?;
    let Some(user) = user.filter(|_| ok) else {
        return failed_page(&state, &email, &client, settled.locked_now, raw_email, next).await;
    };
    if user.disabled_at.is_some() {
        return disabled_page(&state, &email, &client, raw_email, next).await;
    }
    // Failed sign-ins since the last one, or a lock, are told to the person on their account page
    // first (where they can see when and from where), with a link on to where they were going.
    let told = settled.failures_before > 0 || settled.locked_at.is_some();
    let next = if told {
        format!("/account?next={}#sign-in-activity", urlencode(&next))
    } else {
        next
    };
    let mut response = start_session(&state, &headers, &user, next).await?;
    if let Some(cookie) = settled.device_cookie {
        let value = format!(
            "{}={cookie}; Path=/login; HttpOnly; SameSite=Strict; Max-Age={}{}",
            lockout::DEVICE_COOKIE,
            lockout::DEVICE_DAYS * 24 * 3600,
            if state.config.secure_cookies { "; Secure" } else { "" }
        );
        if let Ok(v) = value.parse() {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    Ok(response)
}

/// The sign-in page again, 429, when the attempt is refused before the password is checked (too
/// many failures, or a lock), with how long to wait.
async fn refused_page(
    state: &AppState,
    refused: Admission,
    email: &str,
    client: &str,
    raw_email: String,
    next: String,
) -> PageResult<Response> {
    audit::record_refusal(
        &state.pool,
        &state.refusals,
        email,
        "login.refused",
        email,
        client,
        json!({ "reason": refused.reason() }),
    )
    .await?;
    let mut r = login_page(state, raw_email, next, refused.message()).await?;
    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    if let Admission::Wait(wait) = refused {
        if let Ok(v) = (wait.as_secs() + 1).to_string().parse() {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    Ok(r)
}

/// The sign-in page again, 401, after a wrong email or password; a lock it caused is audited.
async fn failed_page(
    state: &AppState,
    email: &str,
    client: &str,
    locked_now: bool,
    raw_email: String,
    next: String,
) -> PageResult<Response> {
    audit::record(&state.pool, email, "login.failed", email, json!({ "client": client })).await?;
    if locked_now {
        audit::record(
            &state.pool,
            "rentcheck",
            "login.lock",
            email,
            json!({ "failures": lockout::LOCK_AFTER, "client": client }),
        )
        .await?;
    }
    let mut r = login_page(state, raw_email, next, "Email or password is incorrect.".into()).await?;
    *r.status_mut() = StatusCode::UNAUTHORIZED;
    Ok(r)
}

/// The sign-in page again, 403, for a disabled account. Said only to someone who knows the
/// password: it tells them whom to ask.
async fn disabled_page(
    state: &AppState,
    email: &str,
    client: &str,
    raw_email: String,
    next: String,
) -> PageResult<Response> {
    audit::record(&state.pool, email, "login.disabled", email, json!({ "client": client })).await?;
    let mut r = login_page(
        state,
        raw_email,
        next,
        "This account is disabled. Ask an admin to enable it.".into(),
    )
    .await?;
    *r.status_mut() = StatusCode::FORBIDDEN;
    Ok(r)
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("", s)])
        .map(|e| e.trim_start_matches('=').to_owned())
        .unwrap_or_default()
}

/// Rotates the session: whatever session the browser had is ended, a new one begins.
async fn start_session(
    state: &AppState,
    headers: &HeaderMap,
    user: &users::UserRow,
    next: String,
) -> PageResult<Response> {
    if let Some(old) = session::read_cookie(headers, session::COOKIE) {
        session::delete(&state.pool, &old).await?;
    }
    let id = session::create(&state.pool, user.id, state.config.sessions).await?;
    audit::record(&state.pool, &user.email, "login.ok", &user.email, json!({})).await?;
    let secure = state.config.secure_cookies;
    let mut response = Redirect::to(&next).into_response();
    let headers = response.headers_mut();
    for cookie in [
        session::set_cookie(session::COOKIE, &id, state.config.sessions.absolute, secure),
        session::clear_cookie(LOGIN_CSRF_COOKIE, secure),
    ] {
        if let Ok(v) = cookie.parse() {
            headers.append(header::SET_COOKIE, v);
        }
    }
    Ok(response)
}

async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    if let Some(cookie) = session::read_cookie(&headers, session::COOKIE) {
        session::delete(&state.pool, &cookie).await?;
    }
    audit::record(&state.pool, &user.0.email, "logout", &user.0.email, json!({})).await?;
    let mut response = Redirect::to("/login").into_response();
    if let Ok(v) = session::clear_cookie(session::COOKIE, state.config.secure_cookies).parse() {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(response)
}

#[derive(Template)]
#[template(path = "people/setup.html")]
struct SetupPage {
    ctx: PageContext,
    csrf: String,
    /// The setup code from the link rentcheck printed, carried to the POST.
    code: String,
    email: String,
    errors: Vec<String>,
}

#[derive(Template)]
#[template(path = "people/setup_done.html")]
struct SetupDonePage {
    ctx: PageContext,
}

/// Once an account exists the first-run page is closed: it says so and where to sign in (410
/// Gone), whoever asks, and creates nothing. `None` while there is no account yet.
async fn setup_closed(state: &AppState) -> PageResult<Option<Response>> {
    if users::count(&state.pool).await? == 0 {
        return Ok(None);
    }
    let mut page = render(&SetupDonePage {
        ctx: PageContext::anonymous(),
    })?;
    *page.status_mut() = StatusCode::GONE;
    Ok(Some(page))
}

/// The first-run page is open only for a browser on this machine (`from_this_machine`: a loopback
/// peer, no forwarding header, not under another site's name), and only with the setup code
/// `rentcheck serve` printed when it started. A reverse proxy on the same machine that adds no
/// forwarding header (nginx's default `proxy_pass`) makes every visitor a loopback peer with a
/// loopback `Host`; the code is what such a visitor cannot have: it was only ever shown to whoever
/// started the server.
async fn setup_allowed(state: &AppState, peer: SocketAddr, headers: &HeaderMap, code: Option<&str>) -> PageResult<()> {
    if !from_this_machine(headers, peer.ip(), &state.config.public_url) {
        return Err(PageError(AppError::Forbidden(
            "First-run setup is only open from the machine rentcheck runs on. \
             Or create the first admin with `rentcheck user add --email you@example.com --role admin`."
                .into(),
        )));
    }
    if !code.is_some_and(|c| secrets::equal(c.trim(), state.config.setup_code.expose())) {
        return Err(PageError(AppError::Forbidden(
            "First-run setup needs the link `rentcheck serve` printed when it started (…/setup?code=…). \
             Or create the first admin with `rentcheck user add --email you@example.com --role admin`."
                .into(),
        )));
    }
    Ok(())
}

async fn setup_page(state: &AppState, code: String, email: String, errors: Vec<String>) -> PageResult<Response> {
    let csrf = secrets::random_token();
    let mut response = render(&SetupPage {
        ctx: PageContext::anonymous(),
        csrf: csrf.clone(),
        code,
        email,
        errors,
    })?;
    set_login_csrf_cookie(state, &mut response, &csrf);
    Ok(response)
}

#[derive(Deserialize)]
struct SetupQuery {
    code: Option<String>,
}

async fn setup_form(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<SetupQuery>,
) -> PageResult<Response> {
    if let Some(closed) = setup_closed(&state).await? {
        return Ok(closed);
    }
    setup_allowed(&state, peer, &headers, q.code.as_deref()).await?;
    setup_page(&state, q.code.unwrap_or_default(), String::new(), Vec::new()).await
}

async fn setup(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    HtmlForm(form): HtmlForm<HashMap<String, String>>,
) -> PageResult<Response> {
    if let Some(closed) = setup_closed(&state).await? {
        return Ok(closed);
    }
    let code = form.get("code").cloned().unwrap_or_default();
    setup_allowed(&state, peer, &headers, Some(&code)).await?;
    if !pre_session_csrf_ok(&headers, &form) {
        return Ok(csrf_failure());
    }
    let email = form.get("email").cloned().unwrap_or_default();
    let password = form.get("password").cloned().unwrap_or_default();
    // At most one first admin, however many forms are sent at once (`add_first_admin` locks).
    let entry = |u: &users::UserRow| {
        audit::Entry::new(
            &u.email,
            "user.add",
            &u.email,
            json!({ "role": "admin", "via": "setup" }),
        )
    };
    match users::add_first_admin(&state.pool, &email, password, entry).await {
        Ok(None) => Err(PageError(AppError::Conflict(
            "The first account was created a moment ago by another request; sign in instead.".into(),
        ))),
        Ok(Some(user)) => start_session(&state, &headers, &user, "/".into()).await,
        Err(AppError::Validation(errors)) => {
            let messages = errors
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect();
            let mut r = setup_page(&state, code, email, messages).await?;
            *r.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(r)
        }
        Err(e) => Err(PageError(e)),
    }
}

/// A token row as the tokens page shows it.
struct TokenLine {
    jti: String,
    name: String,
    /// The trial it is scoped to, or "any trial".
    trial: String,
    created: String,
    expires: String,
    last_used: String,
    state: &'static str,
}

impl TokenLine {
    fn new(t: &TokenRow, trials: &[(TrialId, String)]) -> Self {
        let when = |d: chrono::DateTime<chrono::Utc>| d.format("%Y-%m-%d %H:%M UTC").to_string();
        let state = if t.revoked_at.is_some() {
            "revoked"
        } else if t.expires_at <= chrono::Utc::now() {
            "expired"
        } else {
            "active"
        };
        Self {
            jti: t.jti.to_string(),
            name: t.name.clone(),
            trial: match t.trial_id {
                Some(id) => trials
                    .iter()
                    .find(|(t, _)| *t == id)
                    .map(|(_, n)| n.clone())
                    .unwrap_or_default(),
                None => "any trial".to_owned(),
            },
            created: when(t.created_at),
            expires: when(t.expires_at),
            last_used: t.last_used_at.map(when).unwrap_or_else(|| "never".into()),
            state,
        }
    }
}

#[derive(Template)]
#[template(path = "people/tokens.html")]
struct TokensPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    tokens: Vec<TokenLine>,
    /// (id, name) of the brief's trials, for the mint form's choice.
    trials: Vec<(String, String)>,
    minted: Option<String>,
    curl_example: String,
    collect_example: String,
    /// The Test plan page of the trial the token is for (else the first trial).
    plan_href: String,
    error: String,
    /// One recipe per stage of the card, with the docs/agents.md section that explains it.
    recipes: Vec<StageRecipe>,
}

/// What an agent runs for one stage of the card, with the token minted here.
struct StageRecipe {
    stage: u8,
    name: &'static str,
    what: &'static str,
    command: String,
    /// The docs/agents.md sections that explain it, e.g. "§3 `rentcheck collect`".
    docs: &'static str,
}

/// The recipes for stages 1 to 5: the plan runs what it can, and each stage can be sent by hand.
fn stage_recipes(base_url: &str, brief_id: BriefId, trial_flag: &str, trial_query: &str) -> Vec<StageRecipe> {
    let collect = format!("rentcheck collect --server {base_url} --brief {brief_id}{trial_flag}");
    vec![
        StageRecipe {
            stage: 1,
            name: "Environment smoke test",
            what: "nvidia-smi and dcgmi on the rented machine, and nccl-tests over its GPUs",
            command: format!("{collect} --stage 1
{collect} --no-tools --stage 1 --file nccl-tests=nccl.txt"),
            docs: "§3 rentcheck collect, §10 nccl-tests under a launcher",
        },
        StageRecipe {
            stage: 2,
            name: "Functional test",
            what: "what your harness found (the model's artifact loaded, the model pinned, the answers' format) as \
                   probes, and the serving engine's start-up log (its KV cache, its settings)",
            command: format!(
                "{collect} --no-tools --stage 2 --file probe=probes.json
{collect} --no-tools --stage 2 --file vllm-log=vllm-server.log"
            ),
            docs: "§3 rentcheck collect, §4 plain curl",
        },
        StageRecipe {
            stage: 3,
            name: "Representative load test",
            what: "a load test's result, with the server's metrics before and after",
            command: format!("{collect} --no-tools --stage 3 --bench-json result.json"),
            docs: "§5 a vLLM load test, §7 GenAI-Perf or AIPerf, §8 GuideLLM, §9 dcgm-exporter",
        },
        StageRecipe {
            stage: 4,
            name: "Failure test",
            what: "what a drain, a restart or a checkpoint restore did",
            command: format!(
                "jq -n '{{kind: \"checkpoint-restore\", stage: 4, data: {{written: true, restored: true, seconds: 212}}}}' > ckpt.json\n\
                 curl -X POST -H \"Authorization: Bearer $RENTCHECK_TOKEN\" -H 'content-type: application/json' \\\n  \
                 --data-binary @ckpt.json \"{base_url}/api/v1/briefs/{brief_id}/evidence{}\"",
                trial_query.replacen('&', "?", 1)
            ),
            docs: "§4 plain curl (the JSON envelope)",
        },
        StageRecipe {
            stage: 5,
            name: "Acceptance review",
            what: "the bill: ledger lines, so the review has a cost per completed job",
            command: format!(
                "curl -X POST -H \"Authorization: Bearer $RENTCHECK_TOKEN\" -H 'content-type: text/csv' \\\n  \
                 --data-binary @ledger.csv \"{base_url}/api/v1/briefs/{brief_id}/ledger{}\"",
                trial_query.replacen('&', "?", 1)
            ),
            docs: "§4 plain curl; the CSV's columns: docs/ledger.md",
        },
    ]
}

/// What a token was just minted as: the signed token and the trial it is scoped to.
struct Minted {
    token: String,
    trial: Option<TrialId>,
}

async fn tokens_view(
    state: &AppState,
    user: &PageUser,
    brief_id: BriefId,
    minted: Option<Minted>,
    base_url: &str,
    error: String,
) -> PageResult<Response> {
    teams::may_edit_brief(&state.pool, &user.principal(), brief_id).await?;
    let brief = trials::load_brief(&state.pool, brief_id).await?;
    let trials = trials::names(state, brief_id).await?;
    let tokens = token::list_for_brief(&state.pool, brief_id).await?;
    // A token for one trial needs no `trial`; one for any trial of a brief with several must name one.
    let (trial_query, trial_flag) = match (minted.as_ref().and_then(|m| m.trial), trials.as_slice()) {
        (None, [first, _, ..]) => (format!("&trial={}", first.0), format!(" --trial {}", first.0)),
        _ => (String::new(), String::new()),
    };
    // The tool's output goes to a file first and is posted only when the tool succeeded: piped
    // straight into curl, a missing nvidia-smi would post nothing. The key makes a re-run within
    // the hour a replay rather than a second item.
    let curl_example = format!(
        "nvidia-smi -L > gpus.txt && curl -X POST -H \"Authorization: Bearer $RENTCHECK_TOKEN\" \\\n  \
         -H \"Idempotency-Key: $(hostname)-gpus-$(date -u +%Y%m%d%H)\" --data-binary @gpus.txt \\\n  \
         \"{base_url}/api/v1/briefs/{brief_id}/evidence?kind=nvidia-smi-list&stage=1{trial_query}\"",
    );
    // The whole test plan in one command (every stage collect can run), for the token's trial, else
    // the first trial.
    let plan_trial = minted
        .as_ref()
        .and_then(|m| m.trial)
        .map(|t| t.to_string())
        .or_else(|| trials.first().map(|t| t.0.to_string()))
        .unwrap_or_default();
    let collect_example =
        format!("rentcheck collect --server {base_url} --plan --brief {brief_id} --trial {plan_trial}");
    let plan_href = format!("/briefs/{brief_id}/trials/{plan_trial}/plan");
    let recipes = stage_recipes(base_url, brief_id, &trial_flag, &trial_query);
    render(&TokensPage {
        ctx: user.into(),
        brief_id: brief_id.to_string(),
        brief_name: brief.fields.name,
        tokens: tokens.iter().map(|t| TokenLine::new(t, &trials)).collect(),
        trials: trials.iter().map(|(id, name)| (id.to_string(), name.clone())).collect(),
        minted: minted.map(|m| m.token),
        curl_example,
        collect_example,
        plan_href,
        error,
        recipes,
    })
}

/// The one-time cookie that carries a just-minted token from the mint to the page that shows it
/// once (`web::once`: post/redirect/get, so a refresh mints nothing).
const MINTED_COOKIE: &str = "rentcheck_minted";

async fn tokens_page(
    State(state): State<AppState>,
    user: PageUser,
    BriefPath { id }: BriefPath,
    headers: HeaderMap,
) -> PageResult<Response> {
    // The address agents use (RENTCHECK_PUBLIC_URL), not the Host this browser happened to use.
    let base = state.config.public_url.clone();
    let minted = once::read(&headers, MINTED_COOKIE).and_then(|f| {
        Some(Minted {
            token: once::field(&f, "token")?.to_owned(),
            trial: once::field(&f, "trial").and_then(|t| t.parse().ok()),
        })
    });
    let shown_once = minted.is_some();
    let response = tokens_view(&state, &user, id, minted, &base, String::new()).await?;
    Ok(if shown_once {
        once::shown(
            response,
            MINTED_COOKIE,
            &format!("/briefs/{id}/tokens"),
            state.config.secure_cookies,
        )
    } else {
        response
    })
}

pub const TOKEN_TTL_CHOICES: [&str; 4] = ["1d", "7d", "30d", "90d"];

async fn mint_token(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, form): CsrfForm,
) -> PageResult<Response> {
    let id = path.id;
    teams::may_edit_brief(&state.pool, &user.principal(), id).await?;
    let base = state.config.public_url.clone();
    path.load(&state).await?;
    let trial = match form.get("trial").map(|t| t.trim()).filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => {
            let known = trials::names(&state, id).await?;
            match t.parse::<TrialId>().ok().filter(|t| known.iter().any(|(k, _)| k == t)) {
                Some(t) => Some(t),
                None => return tokens_view(&state, &user, id, None, &base, "Pick a trial of this brief.".into()).await,
            }
        }
    };
    let name = form.get("name").map(|n| n.trim().to_owned()).unwrap_or_default();
    let ttl_text = form.get("ttl").cloned().unwrap_or_else(|| "30d".into());
    let ttl = match token::parse_ttl(&ttl_text) {
        Ok(ttl) if TOKEN_TTL_CHOICES.contains(&ttl_text.as_str()) => ttl,
        _ => return tokens_view(&state, &user, id, None, &base, "Pick a lifetime from the list.".into()).await,
    };
    if name.is_empty() || name.chars().count() > 100 {
        return tokens_view(
            &state,
            &user,
            id,
            None,
            &base,
            "Give the token a name of 1–100 characters.".into(),
        )
        .await;
    }
    let new = NewToken {
        name: name.clone(),
        subject: user.0.email.clone(),
        role: Role::Agent,
        brief: Some(id),
        trial,
        ttl,
        created_by: Some(user.0.id),
    };
    let target = format!("brief:{id}");
    let (signed, _) = audit::audited(
        &state.pool,
        async |conn| token::mint(conn, &state.keys, new).await,
        |(_, row)| {
            let details =
                json!({ "jti": row.jti, "name": name, "role": "agent", "trial": trial, "expires_at": row.expires_at });
            Some(audit::Entry::new(&user.0.email, "token.mint", &target, details))
        },
    )
    .await?;
    let trial = trial.map(|t| t.to_string()).unwrap_or_default();
    Ok(once::redirect(
        MINTED_COOKIE,
        &format!("/briefs/{id}/tokens"),
        "#minted-token",
        &[("token", &signed), ("trial", &trial)],
        state.config.secure_cookies,
    )?)
}

async fn revoke_token(
    State(state): State<AppState>,
    Path((brief_id, jti)): Path<(BriefId, TokenId)>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    teams::may_edit_brief(&state.pool, &user.principal(), brief_id).await?;
    let row = token::get(&state.pool, jti)
        .await?
        .filter(|t| t.brief_id == Some(brief_id))
        .ok_or(AppError::NotFound("token"))?;
    let entry = audit::Entry::new(
        &user.0.email,
        "token.revoke",
        &format!("brief:{brief_id}"),
        json!({ "jti": row.jti, "name": row.name }),
    );
    token::revoke_audited(&state.pool, &state.slots.get::<token::Tokens>(), row.jti, entry).await?;
    Ok(Redirect::to(&format!("/briefs/{brief_id}/tokens")).into_response())
}
