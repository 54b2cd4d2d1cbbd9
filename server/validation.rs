//! Validation results shared by every domain model: one message per field. Pure, with no web or
//! database dependency, so the pure engines and models can report bad input without pulling in axum.

use serde::Serialize;

/// A message about one input field (`field` as the API and the form name it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}
