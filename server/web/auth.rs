//! Extractors that say who is asking (a bearer token, a signed-in person, a CSRF-checked form), and
//! the Origin check on unsafe methods.

use std::{collections::HashMap, net::IpAddr};

use axum::{
    extract::{FromRequest, FromRequestParts, MatchedPath, Request},
    http::{header, request::Parts, HeaderMap, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Redirect, Response},
};

use super::{
    extract::HtmlForm,
    page::{PageContext, PageError},
};
use crate::{
    auth::{
        session::{self, SessionUser},
        token, Principal, Role,
    },
    error::AppError,
    state::AppState,
};

/// What every API handler starts from: the app's state and the caller of the route (a bearer
/// token, or a browser session for reading). One extractor for the pair, so a handler cannot take
/// the state and forget the caller.
pub struct ApiCall {
    pub state: AppState,
    pub caller: Principal,
}

impl FromRequestParts<AppState> for ApiCall {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let caller = api_caller(parts, state).await?;
        Ok(ApiCall {
            state: state.clone(),
            caller,
        })
    }
}

/// Who is calling an API route, or why they may not.
async fn api_caller(parts: &Parts, state: &AppState) -> Result<Principal, AppError> {
    if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| AppError::Unauthorized("malformed Authorization header".into()))?;
        let Some(token) = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")) else {
            return Err(AppError::Unauthorized("use Authorization: Bearer <token>".into()));
        };
        let principal = match token::authenticate(
            &state.pool,
            &state.keys,
            &state.slots.get::<token::Tokens>(),
            token.trim(),
        )
        .await
        {
            Ok(p) => p,
            Err(e @ AppError::Unauthorized(_)) => {
                audit_refused_token(parts, state, &e).await;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        if principal.brief_scope().is_some() {
            let route = parts
                .extensions
                .get::<MatchedPath>()
                .map(MatchedPath::as_str)
                .unwrap_or("");
            if !brief_scoped_route(&parts.method, route) {
                return Err(AppError::Forbidden(
                    "this token is limited to one brief and cannot act outside it".into(),
                ));
            }
        }
        return Ok(principal);
    }
    if let Some(cookie) = session::read_cookie(&parts.headers, session::COOKIE) {
        if let Some(user) = session::lookup(&state.pool, &cookie, state.config.sessions).await? {
            // A session cookie rides along on cross-site requests; only reads are allowed with it.
            if parts.method != Method::GET && parts.method != Method::HEAD {
                return Err(AppError::Forbidden(
                    "changes through the API need a bearer token".into(),
                ));
            }
            return Ok(Principal::User {
                id: user.id,
                email: user.email,
                role: user.role,
            });
        }
    }
    Err(AppError::Unauthorized(
        "authentication required: send Authorization: Bearer <token>".into(),
    ))
}

/// A refused bearer token (forged, expired, revoked, its person disabled) goes to the audit log,
/// once per client in `audit::REFUSALS_WINDOW`: a flood of them writes a row now and
/// then, not a row each. Recording is best effort: the caller is answered 401 either way.
async fn audit_refused_token(parts: &Parts, state: &AppState, error: &AppError) {
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    let client = peer
        .map(|p| client_ip(&parts.headers, p, &state.config.trusted_proxies).to_string())
        .unwrap_or_default();
    let reason = error.to_string();
    if let Err(e) = crate::audit::record_refusal(
        &state.pool,
        &state.refusals,
        "anonymous",
        "auth.token.refused",
        &format!("client:{client}"),
        &client,
        serde_json::json!({
            "reason": reason,
            "route": parts.extensions.get::<MatchedPath>().map(MatchedPath::as_str),
        }),
    )
    .await
    {
        tracing::warn!(error = %e, "could not record a refused bearer token");
    }
}

/// Whether a route acts on one brief (or lists briefs), so a token limited to one brief may reach
/// it at all: routes under a brief, a trial or an evidence item (the brief's decision record
/// included), and the reads of the brief list and the commitments (which show it only its
/// brief's, api.md: such a token "is limited to that brief for reading"). Every other route is refused
/// here, before its handler runs, so a new route outside any brief cannot forget the scope; the
/// handlers then check that the brief is the token's own.
pub fn brief_scoped_route(method: &Method, route: &str) -> bool {
    [
        "/api/v1/briefs/{id}",
        "/api/v1/trials/{tid}",
        "/api/v1/evidence/{id}",
        "/briefs/{id}",
    ]
    .iter()
    .any(|prefix| route == *prefix || route.starts_with(&format!("{prefix}/")))
        || (matches!(
            route,
            "/api/v1/briefs" | "/api/v1/commitments" | "/api/v1/commitments/{cid}"
        ) && matches!(*method, Method::GET | Method::HEAD))
}

/// Only local paths: `/briefs/x`, never `//evil.example`, `/\evil.example` or `https://…`. No
/// whitespace or control character anywhere: browsers drop tabs and newlines from URLs, so
/// `/<TAB>/evil.example` becomes `//evil.example`; and a control character cannot be a header.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if is_local_path(n) => n.to_owned(),
        _ => "/".to_owned(),
    }
}

fn is_local_path(n: &str) -> bool {
    let bytes = n.as_bytes();
    bytes.first() == Some(&b'/')
        && !matches!(bytes.get(1), Some(b'/' | b'\\'))
        && n.len() <= 2048
        && !n.chars().any(|c| c.is_control() || c.is_whitespace() || c == '\\')
        && n.parse::<axum::http::Uri>()
            .is_ok_and(|u| u.scheme().is_none() && u.authority().is_none())
}

/// A signed-in person on a page. Without a session the browser is sent to the login page.
#[derive(Debug, Clone)]
pub struct PageUser(pub SessionUser);

/// Sends the browser to `/login`, remembering where it was going.
pub struct LoginRedirect(String);

impl IntoResponse for LoginRedirect {
    fn into_response(self) -> Response {
        Redirect::to(&format!("/login?next={}", urlencode(&self.0))).into_response()
    }
}

fn urlencode(s: &str) -> String {
    serde_urlencoded::to_string([("", s)])
        .map(|e| e.trim_start_matches('=').to_owned())
        .unwrap_or_default()
}

pub enum PageUserRejection {
    Login(LoginRedirect),
    Error(PageError),
}

impl IntoResponse for PageUserRejection {
    fn into_response(self) -> Response {
        match self {
            PageUserRejection::Login(r) => r.into_response(),
            PageUserRejection::Error(e) => e.into_response(),
        }
    }
}

impl FromRequestParts<AppState> for PageUser {
    type Rejection = PageUserRejection;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let next = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_owned();
        let Some(cookie) = session::read_cookie(&parts.headers, session::COOKIE) else {
            return Err(PageUserRejection::Login(LoginRedirect(next)));
        };
        match session::lookup(&state.pool, &cookie, state.config.sessions).await {
            Ok(Some(user)) => Ok(PageUser(user)),
            Ok(None) => Err(PageUserRejection::Login(LoginRedirect(next))),
            Err(e) => Err(PageUserRejection::Error(PageError::from(e))),
        }
    }
}

impl From<&PageUser> for PageContext {
    fn from(user: &PageUser) -> Self {
        Self {
            email: Some(user.0.email.clone()),
            role: user.0.role.as_str(),
            csrf: user.0.csrf_token.clone(),
            is_admin: user.0.role == Role::Admin,
        }
    }
}

impl PageUser {
    /// People of `min` or higher; a friendly 403 page otherwise.
    pub fn require(&self, min: Role) -> Result<(), PageError> {
        if self.0.role < min {
            return Err(PageError(AppError::Forbidden(format!(
                "This page needs the {} role; you are signed in as {} ({}).",
                min.as_str(),
                self.0.email,
                self.0.role.as_str()
            ))));
        }
        Ok(())
    }

    pub fn principal(&self) -> Principal {
        Principal::User {
            id: self.0.id,
            email: self.0.email.clone(),
            role: self.0.role,
        }
    }
}

/// A state-changing form from a signed-in person, its CSRF token checked against the session.
/// The token field is removed from the values handed on. A `multipart/form-data` form (one with a
/// file input) is read the same way: each file part becomes the text value of its field (files a
/// form takes are CSV or JSON text; anything that is not UTF-8 is refused with 400).
pub struct CsrfForm(pub PageUser, pub HashMap<String, String>);

pub const CSRF_FIELD: &str = "csrf_token";

impl FromRequest<AppState> for CsrfForm {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let user = PageUser::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let req = Request::from_parts(parts, body);
        let mut values = if super::extract::content_type(&req).starts_with("multipart/form-data") {
            multipart_values(req, state)
                .await
                .map_err(|e| PageError(e).into_response())?
        } else {
            let HtmlForm(values) = HtmlForm::<HashMap<String, String>>::from_request(req, state)
                .await
                .map_err(|e| PageError(e).into_response())?;
            values
        };
        let sent = values.remove(CSRF_FIELD).unwrap_or_default();
        if !crate::secrets::equal(&sent, &user.0.csrf_token) {
            return Err(csrf_failure());
        }
        // A file part (a CSV, a config.json) is a text field too.
        super::extract::refuse_nul_in_fields(values.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| PageError(e).into_response())?;
        Ok(CsrfForm(user, values))
    }
}

/// Every part of a multipart form as text: a chosen file wins over an empty text field of the same
/// name, and an empty file input (none chosen) leaves the field as it was.
async fn multipart_values(req: Request, state: &AppState) -> Result<HashMap<String, String>, AppError> {
    #[allow(clippy::disallowed_types)]
    let mut form = axum::extract::Multipart::from_request(req, state)
        .await
        .map_err(|e| AppError::BadRequest(format!("malformed form: {}", e.body_text())))?;
    let mut values = HashMap::new();
    while let Some(field) = form.next_field().await.map_err(|e| form_error(e, "malformed form"))? {
        let name = field.name().unwrap_or_default().to_owned();
        let is_file = field.file_name().is_some();
        let bytes = field
            .bytes()
            .await
            .map_err(|e| form_error(e, "could not read the form"))?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| AppError::BadRequest(format!("the file in {name} is not UTF-8 text")))?;
        if is_file && text.is_empty() {
            continue;
        }
        if is_file || !values.contains_key(&name) || values.get(&name).is_some_and(String::is_empty) {
            values.insert(name, text);
        }
    }
    Ok(values)
}

/// A multipart form that could not be read. Over the route's body limit it says so in words a
/// person can act on (a file chosen by mistake is the usual cause), not a bare "Bad Request".
fn form_error(e: axum::extract::multipart::MultipartError, what: &str) -> AppError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::TooLarge(
            "This form is larger than the server takes: a file chosen in it is too big for this form. Go back: \
             your browser keeps what you typed; choose a smaller file or paste the text."
                .into(),
        )
    } else {
        AppError::BadRequest(format!("{what}: {}", e.body_text()))
    }
}

/// The client's address: the peer, or behind a proxy named in `RENTCHECK_TRUSTED_PROXIES` the last
/// address in `X-Forwarded-For` (the one that proxy saw; earlier entries are the client's to forge).
pub fn client_ip(headers: &HeaderMap, peer: IpAddr, trusted_proxies: &[IpAddr]) -> IpAddr {
    if !trusted_proxies.contains(&peer) {
        return peer;
    }
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .next_back()
        .unwrap_or(peer)
}

/// Whether a request came from a browser on this machine itself: a loopback peer that is no
/// proxy (no forwarding headers), addressed by a loopback `Host` or the configured public host.
/// A same-host reverse proxy makes every visitor loopback, and DNS rebinding makes a remote
/// page's requests loopback with a foreign `Host`; both are refused.
pub fn from_this_machine(headers: &HeaderMap, peer: IpAddr, public_url: &str) -> bool {
    let forwarded = ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip"]
        .iter()
        .any(|h| headers.contains_key(*h));
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let host_name = host_without_port(host).to_ascii_lowercase();
    let public_host = public_url
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(""))
        .map(host_without_port)
        .unwrap_or("")
        .to_ascii_lowercase();
    let loopback_name = host_name == "localhost"
        || host_name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    peer.is_loopback() && !forwarded && !host_name.is_empty() && (loopback_name || host_name == public_host)
}

fn host_without_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split_once(']').map(|(h, _)| &host[..h.len() + 1]).unwrap_or(host);
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

pub fn csrf_failure() -> Response {
    PageError(AppError::Forbidden(
        "This form has expired or did not come from rentcheck. Reload the page and try again.".into(),
    ))
    .into_response()
}

/// Refuses unsafe requests that a browser says come from another site (Origin or
/// Sec-Fetch-Site), whatever the route. Tools that send neither header are not browsers.
pub async fn check_origin(request: Request, next: Next) -> Response {
    let unsafe_method = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if unsafe_method {
        let headers = request.headers();
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        let origin_ok = match headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
            None => true,
            Some(origin) => {
                let authority = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
                !host.is_empty() && authority == host
            }
        };
        let fetch_site_ok = !matches!(
            headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()),
            Some("cross-site")
        );
        if !origin_ok || !fetch_site_ok {
            tracing::warn!(host, "refused a cross-origin unsafe request");
            let error = AppError::Forbidden("cross-origin request refused".into());
            return if request.uri().path().starts_with("/api/") {
                error.into_response()
            } else {
                let mut r = PageError(error).into_response();
                *r.status_mut() = StatusCode::FORBIDDEN;
                r
            };
        }
    }
    next.run(request).await
}
