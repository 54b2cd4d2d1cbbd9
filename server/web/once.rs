//! Post/redirect/get for answers shown once (a new agent token, a generated password). The POST
//! does the work and answers a redirect with a short-lived cookie carrying what to show; the page
//! it leads to shows it, deletes the cookie and is `no-store`. A refresh shows the page without it
//! and repeats nothing (the issue saw a refresh mint a second token). The value never appears in a
//! URL; rentcheck keeps no copy. The cookie is HttpOnly, SameSite=Strict, scoped to that one page
//! and lives two minutes.

use axum::{
    http::{header, HeaderMap, HeaderValue},
    response::{IntoResponse, Redirect, Response},
};

use crate::{auth::session, error::AppError};

/// Long enough to follow a redirect on a slow link; short enough not to linger.
const SECONDS: i64 = 120;

fn cookie(name: &str, path: &str, value: &str, max_age: i64, secure: bool) -> Result<HeaderValue, AppError> {
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    ))
    .map_err(|e| AppError::Internal(e.into()))
}

/// The redirect to `path` (plus `fragment`), carrying `fields` for that page to show once.
pub fn redirect(
    name: &str,
    path: &str,
    fragment: &str,
    fields: &[(&str, &str)],
    secure: bool,
) -> Result<Response, AppError> {
    // Form encoding keeps the value cookie-safe (no `;`, `,`, spaces or quotes).
    let value = serde_urlencoded::to_string(fields).map_err(|e| AppError::Internal(e.into()))?;
    let mut response = Redirect::to(&format!("{path}{fragment}")).into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, cookie(name, path, &value, SECONDS, secure)?);
    Ok(response)
}

/// What the redirect carried, if the request has it.
pub fn read(headers: &HeaderMap, name: &str) -> Option<Vec<(String, String)>> {
    let value = session::read_cookie(headers, name)?;
    serde_urlencoded::from_str(&value).ok()
}

/// Marks a page that showed a carried value: not stored by caches or history, cookie deleted.
pub fn shown(mut response: Response, name: &str, path: &str, secure: bool) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = cookie(name, path, "", 0, secure) {
        headers.append(header::SET_COOKIE, v);
    }
    response
}

/// One field of what was carried.
pub fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}
