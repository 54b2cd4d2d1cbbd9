//! The one error type. It renders as RFC 9457 problem+json for the API and, wrapped in
//! `web::page::PageError`, as a friendly HTML page for people, each with the status it means. A 5xx never shows its cause: the cause
//! is logged once, inside the request's span, and the body names the request id instead.

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;

use crate::{telemetry::current_request_id, validation::FieldError};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    BadRequest(String),
    #[error("some fields are invalid")]
    Validation(Vec<FieldError>),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0} is not a method this address answers; the Allow header lists those it does")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    /// 422 for a request that is well formed but cannot be used, saying why (not a field's fault).
    #[error("{0}")]
    Unprocessable(String),
    #[error("the request body is larger than the limit of {limit} ({0} bytes)", limit = crate::figures::bytes(*.0))]
    PayloadTooLarge(usize),
    /// 413 for a body over a limit other than bytes (e.g. lines in one import), saying which.
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429: throttled (sign-in and password checks, `auth::lockout`).
    #[error("{0}")]
    TooManyRequests(String),
    #[error("the database is unavailable; try again shortly")]
    DatabaseUnavailable,
    #[error("the evidence store is unavailable; try again shortly")]
    StorageUnavailable,
    /// 503: the request did not finish within `RENTCHECK_REQUEST_TIMEOUT` seconds (a stalled body,
    /// a database that accepts connections but does not answer).
    #[error("the request did not finish within {0} s; try again shortly")]
    TimedOut(u64),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for AppError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::RowNotFound => AppError::NotFound("record"),
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => {
                tracing::warn!(error = %e, "database unavailable");
                AppError::DatabaseUnavailable
            }
            // A server shutting down, starting up or out of connections answers with an error of
            // its own rather than a dropped socket: 08 connection exception, 53 insufficient
            // resources, 57 operator intervention (57P01 admin shutdown, 57P03 cannot connect now).
            sqlx::Error::Database(ref db) if db.code().is_some_and(|c| is_unavailable_sqlstate(&c)) => {
                tracing::warn!(error = %e, "database unavailable");
                AppError::DatabaseUnavailable
            }
            // A NUL that got past the extractors (they refuse it at its field): PostgreSQL text
            // cannot hold it (22021), nor jsonb its escape (22P05). Bad input, not a fault.
            sqlx::Error::Database(ref db) if matches!(db.code().as_deref(), Some("22021" | "22P05")) => {
                AppError::Validation(vec![FieldError::new("input", crate::validation::NUL_MESSAGE)])
            }
            other => AppError::Internal(other.into()),
        }
    }
}

fn is_unavailable_sqlstate(code: &str) -> bool {
    ["08", "53", "57"].iter().any(|class| code.starts_with(class))
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::PayloadTooLarge(_) | AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::DatabaseUnavailable | AppError::StorageUnavailable | AppError::TimedOut(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            AppError::BadRequest(_) => "bad-request",
            AppError::Validation(_) => "validation",
            AppError::Unauthorized(_) => "unauthorized",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound(_) => "not-found",
            AppError::MethodNotAllowed(_) => "method-not-allowed",
            AppError::Conflict(_) => "conflict",
            AppError::Unprocessable(_) => "unprocessable",
            AppError::PayloadTooLarge(_) | AppError::TooLarge(_) => "payload-too-large",
            AppError::UnsupportedMediaType(_) => "unsupported-media-type",
            AppError::TooManyRequests(_) => "too-many-requests",
            AppError::DatabaseUnavailable => "database-unavailable",
            AppError::StorageUnavailable => "storage-unavailable",
            AppError::TimedOut(_) => "timed-out",
            AppError::Internal(_) => "internal",
        }
    }

    /// What a client may be told. Internal errors say only that, plus the request id.
    pub fn public_detail(&self) -> String {
        match self {
            AppError::Internal(_) => match current_request_id() {
                Some(id) => format!("internal error (request id {id})"),
                None => "internal error".to_owned(),
            },
            other => other.to_string(),
        }
    }

    pub(crate) fn log(&self) {
        if let AppError::Internal(e) = self {
            // The cause chain on one line: `{:?}` would add anyhow's backtrace (90 lines per 500).
            tracing::error!(error = %format_args!("{e:#}"), "request failed");
        }
    }
}

/// RFC 9457 problem details: every error answer of the API.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Problem<'a> {
    /// problem type URI
    #[serde(rename = "type")]
    kind: String,
    /// the status's reason phrase
    title: &'a str,
    /// HTTP status
    status: u16,
    /// what went wrong
    detail: String,
    /// the invalid fields, on 422
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
    /// the x-request-id of the request
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

impl AppError {
    /// The RFC 9457 problem document of this error, as a JSON value (a batch answers one per
    /// refused item). Logs an internal error's cause, as a response would.
    pub fn problem(&self) -> serde_json::Value {
        self.log();
        serde_json::to_value(self.problem_document()).unwrap_or_default()
    }

    fn problem_document(&self) -> Problem<'_> {
        let status = self.status();
        Problem {
            kind: format!("/docs/problems#{}", self.slug()),
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: self.public_detail(),
            errors: match self {
                AppError::Validation(errors) => Some(errors),
                _ => None,
            },
            request_id: current_request_id(),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        self.log();
        let status = self.status();
        let problem = self.problem_document();
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, AppError>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overview::problems::PROBLEM_TYPES;

    #[test]
    fn every_problem_type_is_explained_on_the_problems_page_with_its_status() {
        let all = [
            AppError::BadRequest(String::new()),
            AppError::Validation(Vec::new()),
            AppError::Unauthorized(String::new()),
            AppError::Forbidden(String::new()),
            AppError::NotFound("x"),
            AppError::MethodNotAllowed("DELETE".into()),
            AppError::Conflict(String::new()),
            AppError::Unprocessable(String::new()),
            AppError::PayloadTooLarge(1),
            AppError::TooLarge(String::new()),
            AppError::UnsupportedMediaType(String::new()),
            AppError::TooManyRequests(String::new()),
            AppError::DatabaseUnavailable,
            AppError::StorageUnavailable,
            AppError::TimedOut(30),
            AppError::Internal(anyhow::anyhow!("x")),
        ];
        for e in &all {
            let entry = PROBLEM_TYPES
                .iter()
                .find(|t| t.slug == e.slug())
                .unwrap_or_else(|| panic!("{} has no entry on /docs/problems", e.slug()));
            assert_eq!(entry.status, e.status().as_u16(), "{}", e.slug());
        }
    }
}
