//! Decoding `POST /api/v1/briefs/{id}/evidence`: read the body under the upload cap while it
//! streams and decode one of the three forms (JSON envelope, raw body, multipart) into an
//! [`Upload`]. What happens to it is `service::ingest`.

use std::collections::{BTreeMap, HashMap};

use axum::{
    body::Body,
    extract::{FromRequest, Multipart, Request},
    http::{header, HeaderMap, HeaderName},
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{value::RawValue, Map, Value};

use super::model::{clean_content_type, EnvelopeData, Upload};
use super::parsers::limits;
use crate::{
    error::{ApiResult, AppError},
    validation::FieldError,
};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Items in one batch, and the bytes of its whole body.
pub const BATCH_MAX_ITEMS: usize = 500;
pub const BATCH_MAX_BYTES: usize = 16 * 1024 * 1024;

fn valid_key(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic())
}

/// The `Idempotency-Key` header: 1–255 visible ASCII characters, or absent.
pub fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(v) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match v.to_str() {
        Ok(s) if valid_key(s) => Ok(Some(s.to_owned())),
        _ => Err(AppError::Validation(vec![FieldError::new(
            "Idempotency-Key",
            "must be 1 to 255 visible ASCII characters",
        )])),
    }
}

/// One item of a batch: its upload (an envelope, as for one upload) or why it is refused, and
/// its `idempotency_key`.
pub struct BatchEntry {
    pub upload: Result<Upload, AppError>,
    pub key: Option<String>,
}

/// Decodes `{ "items": [ envelope, … ] }` read under [`BATCH_MAX_BYTES`]: 1 to
/// [`BATCH_MAX_ITEMS`] items, each refused on its own when it is not a valid envelope or its raw
/// content is over `max_item` bytes.
pub async fn decode_batch(req: Request, max_item: usize) -> ApiResult<Vec<BatchEntry>> {
    let (parts, body) = req.into_parts();
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if !is_json(&ct) {
        return Err(AppError::UnsupportedMediaType(
            "a batch is a JSON document: { \"items\": [ … ] } with Content-Type application/json".into(),
        ));
    }
    let raw = read_capped(body, &parts.headers, BATCH_MAX_BYTES).await?;
    let items = match batch_items(&raw) {
        Some(items) => items?,
        None => return Err(refuse_non_object(&raw, items_error())),
    };
    let mut entries = Vec::with_capacity(items.len());
    for item in items {
        let entry = match read_envelope(&raw, item.get().as_bytes()) {
            Some(read) => {
                let (members, data) = read?;
                let key = members.get("idempotency_key").map_or(Ok(None), batch_key);
                let upload = Upload::from_envelope(members, data).map_err(AppError::Validation);
                batch_entry(upload, key, max_item)
            }
            // An item that is JSON (the batch is) but not an object.
            None => BatchEntry {
                upload: Err(envelope_not_an_object()),
                key: None,
            },
        };
        entries.push(entry);
    }
    Ok(entries)
}

/// The items of `{ "items": [ … ] }`, each as the JSON text sent, or the batch's error; `None` when
/// the body is not a JSON object ([`refuse_non_object`]).
fn batch_items(raw: &[u8]) -> Option<ApiResult<Vec<&RawValue>>> {
    let mut members = json_members(raw)?;
    let items: Vec<&RawValue> = members
        .remove("items")
        .and_then(|i| serde_json::from_str(i.get()).ok())
        .unwrap_or_default();
    Some(check_item_count(items.len()).map(|()| items))
}

/// A JSON object's members as the text sent, none of them built (a member given twice: the last,
/// as in a JSON map). `None` when `text` is not a JSON object.
fn json_members(text: &[u8]) -> Option<BTreeMap<String, &RawValue>> {
    // serde would read an array into a map's entries too, never as an object.
    if !text.trim_ascii_start().starts_with(b"{") {
        return None;
    }
    serde_json::from_slice(text).ok()
}

fn check_item_count(n: usize) -> ApiResult<()> {
    if n > BATCH_MAX_ITEMS {
        return Err(AppError::Validation(vec![FieldError::new(
            "items",
            format!("holds {n} items; send at most {BATCH_MAX_ITEMS} per batch"),
        )]));
    }
    if n == 0 {
        return Err(items_error());
    }
    Ok(())
}

fn items_error() -> AppError {
    AppError::Validation(vec![FieldError::new(
        "items",
        format!("must be an array of 1 to {BATCH_MAX_ITEMS} evidence items"),
    )])
}

fn envelope_not_an_object() -> AppError {
    AppError::Validation(vec![FieldError::new("body", "must be a JSON object")])
}

/// The answer to a body that is not a JSON object: 400 when it is not JSON (nested deeper than
/// serde_json's limit included), `refusal` otherwise. One holding an object wider than the key
/// limit is not built to find out.
fn refuse_non_object(raw: &[u8], refusal: AppError) -> AppError {
    if is_wide(raw) {
        return refusal;
    }
    match parse_json(raw) {
        Err(e) => e,
        Ok(_) => refusal,
    }
}

/// A batch item's `idempotency_key`: absent, null or 1 to 255 visible ASCII characters.
fn batch_key(key: &Value) -> ApiResult<Option<String>> {
    match key {
        Value::Null => Ok(None),
        Value::String(s) if valid_key(s) => Ok(Some(s.clone())),
        _ => Err(AppError::Validation(vec![FieldError::new(
            "idempotency_key",
            "must be 1 to 255 visible ASCII characters",
        )])),
    }
}

fn batch_entry(upload: ApiResult<Upload>, key: ApiResult<Option<String>>, max_item: usize) -> BatchEntry {
    let upload = upload.and_then(|u| {
        if u.raw.len() > max_item {
            Err(AppError::PayloadTooLarge(max_item))
        } else {
            Ok(u)
        }
    });
    match key {
        Ok(key) => BatchEntry { upload, key },
        Err(e) => BatchEntry {
            upload: Err(e),
            key: None,
        },
    }
}

/// An envelope's members other than `data`, each parsed, and its `data` as sent.
type EnvelopeMembers = (Map<String, Value>, Option<EnvelopeData>);

/// Reads the envelope `text`, which lies within `body`, member by member: each member is parsed on
/// its own (after the key-limit walk), and `data` is kept as the bytes sent (a slice of `body`, not
/// a copy) for its parser to read once. `None` when `text` is not a JSON object (or not JSON).
fn read_envelope(body: &Bytes, text: &[u8]) -> Option<ApiResult<EnvelopeMembers>> {
    let mut members = json_members(text)?;
    let data = members
        .remove("data")
        .map(|d| d.get())
        .filter(|d| *d != "null")
        .map(|d| {
            if d.starts_with(['{', '[']) {
                EnvelopeData::Json(body.slice_ref(d.as_bytes()))
            } else {
                EnvelopeData::Other
            }
        });
    let members: ApiResult<Map<String, Value>> = members
        .into_iter()
        .map(|(name, member)| member_value(&name, member).map(|v| (name, v)))
        .collect();
    Some(members.map(|members| (members, data)))
}

/// One envelope member parsed; one holding an object wider than the key limit is refused as that
/// field's error, unbuilt.
fn member_value(name: &str, member: &RawValue) -> ApiResult<Value> {
    let text = member.get().as_bytes();
    if is_wide(text) {
        return Err(AppError::Validation(vec![FieldError::new(
            name,
            format!("holds an object of more than {} keys", limits::MAX_METRIC_KEYS),
        )]));
    }
    parse_json(text)
}

/// Reads the whole body, failing with 413 as soon as it passes `max` bytes: at once when
/// `Content-Length` says so, otherwise when the streamed (e.g. chunked) frames add up past it.
pub async fn read_capped(body: Body, headers: &HeaderMap, max: usize) -> ApiResult<Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(AppError::PayloadTooLarge(max));
    }
    // Each frame is copied into one buffer as it arrives and then dropped, so the body is in memory
    // once. (`collect().to_bytes()` keeps every frame until it copies them all into one buffer: two
    // copies of a 16 MiB upload at its peak.) With a declared length the buffer is allocated once.
    let mut buffer = BytesMut::with_capacity(declared.map_or(0, |n| n as usize));
    let mut body = Limited::new(body, max);
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    buffer.extend_from_slice(&data);
                }
            }
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(AppError::PayloadTooLarge(max)),
            Err(e) => return Err(AppError::BadRequest(format!("could not read the request body: {e}"))),
        }
    }
    Ok(buffer.freeze())
}

enum Form {
    Envelope,
    Raw,
    Multipart,
}

fn is_json(ct: &str) -> bool {
    ct.starts_with("application/json") || (ct.starts_with("application/") && ct.contains("+json"))
}

/// Decodes the request into an upload. Which form it is depends on the content type and the query:
/// multipart → the `file` part; `?kind=` or `?stage=` present → the raw body, whatever its type;
/// JSON without them → the envelope; anything else → 415.
pub async fn decode(req: Request, max: usize) -> ApiResult<Upload> {
    let (parts, body) = req.into_parts();
    let ct_header = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let ct = ct_header.as_deref().unwrap_or("").trim().to_ascii_lowercase();
    let query: HashMap<String, String> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(parts.uri.query().unwrap_or(""))
            .map_err(|e| AppError::BadRequest(format!("malformed query string: {e}")))?
            .into_iter()
            .collect();
    let form = if ct.starts_with("multipart/form-data") {
        Form::Multipart
    } else if query.contains_key("kind") || query.contains_key("stage") {
        Form::Raw
    } else if is_json(&ct) {
        Form::Envelope
    } else {
        return Err(AppError::UnsupportedMediaType(format!(
            "got Content-Type {}: send a JSON envelope (application/json), a raw body with ?kind=&stage=, \
             or multipart/form-data with a file part",
            if ct.is_empty() { "none" } else { &ct }
        )));
    };
    let raw = read_capped(body, &parts.headers, max).await?;
    match form {
        Form::Raw => Upload::from_fields(&query, clean_content_type(ct_header.as_deref()), None, raw)
            .map_err(AppError::Validation),
        Form::Envelope => match read_envelope(&raw, &raw) {
            Some(read) => {
                let (members, data) = read?;
                Upload::from_envelope(members, data).map_err(AppError::Validation)
            }
            None => Err(refuse_non_object(&raw, envelope_not_an_object())),
        },
        Form::Multipart => {
            let req = Request::from_parts(parts, Body::from(raw));
            decode_multipart(req, query).await
        }
    }
}

/// The body is already in memory (read under the cap), so a multipart error is a malformed body.
fn multipart_error(e: axum::extract::multipart::MultipartError) -> AppError {
    AppError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
}

/// Text parts (`kind`, `stage`, `collected_at`, `labels`, `label.<name>`) join the query's fields;
/// exactly one `file` part holds the evidence.
async fn decode_multipart(req: Request, mut fields: HashMap<String, String>) -> ApiResult<Upload> {
    let mut mp = Multipart::from_request(req, &())
        .await
        .map_err(|e| AppError::BadRequest(format!("malformed multipart request: {}", e.body_text())))?;
    let mut file = None;
    while let Some(field) = mp.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or("").to_owned();
        if name == "file" {
            if file.is_some() {
                return Err(AppError::Validation(vec![FieldError::new(
                    "file",
                    "send one file part per request",
                )]));
            }
            let ct = field.content_type().map(str::to_owned);
            let filename = field.file_name().map(str::to_owned);
            let data = field.bytes().await.map_err(multipart_error)?;
            file = Some((ct, filename, data));
        } else {
            let text = field.text().await.map_err(multipart_error)?;
            fields.insert(name, text);
        }
    }
    let Some((ct, filename, data)) = file else {
        return Err(AppError::Validation(vec![FieldError::new(
            "file",
            "a part named file is required",
        )]));
    };
    Upload::from_fields(&fields, clean_content_type(ct.as_deref()), filename, data).map_err(AppError::Validation)
}

fn parse_json(raw: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(raw).map_err(|e| AppError::BadRequest(format!("malformed JSON: {e}")))
}

/// Whether a JSON body holds an object wider than an evidence item may have metric keys (walked,
/// not built: see `parsers::limits`).
fn is_wide(raw: &[u8]) -> bool {
    std::str::from_utf8(raw).ok().and_then(limits::too_wide).is_some()
}
