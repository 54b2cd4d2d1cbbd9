//! Our own extractors. axum's `Json`, `Form` and `Path` answer malformed input with plain text;
//! these answer with the problem+json shape (or the error page) instead. clippy.toml forbids the raw ones.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{header, request::Parts, StatusCode},
};
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// Reads the whole body under the route's body limit; 413 past it.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, AppError> {
    #[allow(clippy::disallowed_types)]
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::PayloadTooLarge(rejection.body_text().len())
        } else {
            AppError::BadRequest(format!("could not read the request body: {}", rejection.body_text()))
        }
    })
}

/// The request's `Content-Type`, lower-cased; empty when absent.
pub fn content_type(req: &Request) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// A JSON body. 415 for another content type, 400 for malformed JSON (with line and column).
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ct = content_type(&req);
        let is_json = ct.starts_with("application/json") || (ct.starts_with("application/") && ct.contains("+json"));
        if !is_json {
            return Err(AppError::UnsupportedMediaType(format!(
                "expected Content-Type: application/json, got {}",
                if ct.is_empty() { "none" } else { &ct }
            )));
        }
        let bytes = body_bytes(req, state).await?;
        serde_json::from_slice(&bytes)
            .map(ApiJson)
            .map_err(|e| AppError::BadRequest(format!("malformed JSON: {e}")))
    }
}

/// An `application/x-www-form-urlencoded` body from an HTML form.
pub struct HtmlForm<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for HtmlForm<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !content_type(&req).starts_with("application/x-www-form-urlencoded") {
            return Err(AppError::UnsupportedMediaType("expected a form submission".into()));
        }
        let bytes = body_bytes(req, state).await?;
        serde_urlencoded::from_bytes(&bytes)
            .map(HtmlForm)
            .map_err(|e| AppError::BadRequest(format!("malformed form: {e}")))
    }
}

/// Path parameters, deserialized: `Path<Uuid>` for `/briefs/{id}`, `Path<(Uuid, Uuid)>` or
/// `Path<(Uuid, i64)>` for two segments. A segment that does not fit (not a UUID, not a number)
/// cannot name a record: 404, as problem+json (or the error page, through `PageError`).
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        #[allow(clippy::disallowed_types)]
        let axum::extract::Path(value) = axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map_err(|_| AppError::NotFound("record"))?;
        Ok(Path(value))
    }
}

/// The query string, deserialized. 400 (problem+json) when it does not fit `T`.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        serde_urlencoded::from_str(parts.uri.query().unwrap_or(""))
            .map(ApiQuery)
            .map_err(|e| AppError::BadRequest(format!("malformed query string: {e}")))
    }
}
