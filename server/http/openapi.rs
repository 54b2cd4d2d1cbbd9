//! `/api/openapi.json` (filled in below).
use axum::Json;
use serde_json::Value;
pub async fn endpoint() -> Json<Value> {
    Json(serde_json::json!({}))
}
