//! Our own extractors. axum's `Json`, `Form` and `Path` answer malformed input with plain text;
//! these answer with the problem+json shape (or the error page) instead. clippy.toml forbids the raw ones.

use axum::{
    body::Bytes,
    extract::{FromRequest, FromRequestParts, Request},
    http::{header, request::Parts, StatusCode},
};
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// Default cap for request bodies; ingest routes and some pages set their own, larger limit.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// A route's body cap, beside its `DefaultBodyLimit` (axum keeps that one private), so a 413 can
/// name it: see [`body_limit`].
#[derive(Debug, Clone, Copy)]
pub struct BodyCap(pub usize);

/// The layers that cap a route's bodies at `max` bytes and let its 413 say so.
pub fn body_limit<S: Clone + Send + Sync + 'static>(router: axum::Router<S>, max: usize) -> axum::Router<S> {
    router
        .layer(axum::extract::DefaultBodyLimit::max(max))
        .layer(axum::Extension(BodyCap(max)))
}

/// Reads the whole body under the route's body limit; 413 past it, naming the limit.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, AppError> {
    let cap = req.extensions().get::<BodyCap>().map_or(DEFAULT_BODY_LIMIT, |c| c.0);
    #[allow(clippy::disallowed_types)]
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::PayloadTooLarge(cap)
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

/// A JSON body. 415 for another content type, 400 for malformed JSON (with line and column), 422
/// at the field for well-formed JSON whose fields are wrong (an unknown key, a string where a
/// boolean belongs, a required field left out).
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
        refuse_nul_in_json(&bytes)?;
        json_body(&bytes).map(ApiJson)
    }
}

/// Reads a typed JSON body: 400 when it is not JSON, 422 naming the field when it is JSON of the
/// wrong shape.
pub fn json_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut reader).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        if inner.classify() != serde_json::error::Category::Data {
            return AppError::BadRequest(format!("malformed JSON: {inner}"));
        }
        let field = if field == "." { "body".to_owned() } else { field };
        AppError::Validation(vec![crate::validation::FieldError::new(field, inner.to_string())])
    })?;
    // Trailing characters after the value are malformed JSON, as `serde_json::from_slice` says.
    reader
        .end()
        .map_err(|e| AppError::BadRequest(format!("malformed JSON: {e}")))?;
    Ok(value)
}

/// A text field holding NUL (`validation::NUL_MESSAGE`) is refused at the field (422) before it
/// reaches a handler, for every JSON body, form and query string.
fn nul_error(field: impl Into<String>) -> AppError {
    AppError::Validation(vec![crate::validation::FieldError::new(
        field,
        crate::validation::NUL_MESSAGE,
    )])
}

/// A JSON text can carry NUL only as the escape `\u0000` (a raw control character is malformed
/// JSON). Cheap when there is none: one pass over the bytes; the field is looked for only then.
pub fn refuse_nul_in_json(bytes: &[u8]) -> Result<(), AppError> {
    let escaped_nul = bytes
        .windows(6)
        .enumerate()
        .any(|(i, w)| w == b"\\u0000" && bytes[..i].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0);
    if !escaped_nul {
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(value) => match nul_path(&value, String::new()) {
            Some(field) => Err(nul_error(field)),
            None => Ok(()),
        },
        // Malformed: the caller's parse says where.
        Err(_) => Ok(()),
    }
}

/// The path of the first string (or key) holding NUL: `lines[0].description`, `model_config.name`.
fn nul_path(value: &serde_json::Value, at: String) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) if s.contains('\0') => Some(if at.is_empty() { "body".into() } else { at }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, format!("{at}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let field = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            if k.contains('\0') {
                Some(field.replace('\0', "\u{FFFD}"))
            } else {
                nul_path(v, field)
            }
        }),
        _ => None,
    }
}

/// Refuses a form's or query string's field holding NUL, naming the field.
pub fn refuse_nul_in_fields<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<(), AppError> {
    for (name, value) in fields {
        if name.contains('\0') || value.contains('\0') {
            return Err(nul_error(name.replace('\0', "\u{FFFD}")));
        }
    }
    Ok(())
}

fn refuse_nul_in_urlencoded(bytes: &[u8]) -> Result<(), AppError> {
    // Only a `%00` decodes to NUL (a raw NUL byte too, which no browser sends).
    if !bytes.windows(3).any(|w| w == b"%00") && !bytes.contains(&0) {
        return Ok(());
    }
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes).unwrap_or_default();
    refuse_nul_in_fields(fields.iter().map(|(k, v)| (k.as_str(), v.as_str())))
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
        refuse_nul_in_urlencoded(&bytes)?;
        serde_urlencoded::from_bytes(&bytes)
            .map(HtmlForm)
            .map_err(|e| AppError::BadRequest(format!("malformed form: {e}")))
    }
}

/// Path parameters, deserialized: [`BriefPath`] for `/briefs/{id}`, `Path<(BriefId, TrialId)>` or
/// `Path<(BriefId, i64)>` for two segments (`crate::ids`; other records' ids are `Uuid`). A segment
/// that does not fit (not a UUID, not a number) cannot name a record: 404, as problem+json (or the
/// error page, through `PageError`).
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

/// The brief a route names, `/briefs/{id}…` and `/api/v1/briefs/{id}…` (after crates.io's
/// `CratePath`): every handler of a brief takes this, never a bare `Path<BriefId>`. Reading it checks
/// only that `{id}` is a UUID (404 otherwise, as [`Path`]); the handler checks who may see the brief
/// first and then calls `load` (`trials::service`, where trial 1's allocation joins the brief's own
/// fields), so a stranger gets the same answer whether or not the brief exists, and every handler
/// holds the one whole [`crate::briefs::model::Brief`]. As OpenAPI parameters it is `{id}`, "brief id".
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct BriefPath {
    /// brief id
    #[param(value_type = uuid::Uuid)]
    pub id: crate::ids::BriefId,
}

impl<S: Send + Sync> FromRequestParts<S> for BriefPath {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Other segments of the route (`{tid}`, `{n}`) are left to their own extractor.
        Path::<BriefPath>::from_request_parts(parts, state)
            .await
            .map(|Path(path)| path)
    }
}

/// The query string, deserialized. 400 (problem+json) when it does not fit `T`.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        refuse_nul_in_urlencoded(query.as_bytes())?;
        serde_urlencoded::from_str(query)
            .map(ApiQuery)
            .map_err(|e| AppError::BadRequest(format!("malformed query string: {e}")))
    }
}
