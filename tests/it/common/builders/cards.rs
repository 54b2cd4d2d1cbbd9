//! Acceptance cards: the criteria a brief's evidence is judged by, saved over its default card.

use serde_json::{json, Value};

use super::expect_status;
use crate::common::TestApp;

#[must_use]
pub struct CardBuilder {
    criteria: Value,
}

impl Default for CardBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CardBuilder {
    /// A card with no criteria yet.
    pub fn new() -> Self {
        Self { criteria: json!([]) }
    }

    /// A card of these criteria (a JSON array, as the API answers a card's `criteria`; a test of
    /// the validation may pass anything).
    pub fn of(criteria: Value) -> Self {
        Self { criteria }
    }

    /// One more criterion, whole (`{"key", "op", "threshold", "stage", "required", …}`).
    pub fn criterion(mut self, criterion: Value) -> Self {
        self.criteria
            .as_array_mut()
            .expect("criteria to add to")
            .push(criterion);
        self
    }

    /// One more required criterion: `key` `op` `threshold` at `stage`.
    pub fn requires(self, key: &str, op: &str, threshold: impl Into<Value>, stage: u8) -> Self {
        self.criterion(json!({ "key": key, "op": op, "threshold": threshold.into(), "stage": stage, "required": true }))
    }

    /// Changes the threshold of the criterion on `key`.
    pub fn threshold(mut self, key: &str, threshold: impl Into<Value>) -> Self {
        let threshold = threshold.into();
        let item = self
            .criteria
            .as_array_mut()
            .expect("criteria to change")
            .iter_mut()
            .find(|c| c["key"] == key)
            .unwrap_or_else(|| panic!("no criterion on {key}"));
        item["threshold"] = threshold;
        self
    }

    /// The card as the API takes it.
    pub fn json(&self) -> Value {
        json!({ "criteria": self.criteria })
    }

    /// Saves the card on `brief` as the default engineer and answers the response, whatever it is.
    pub async fn put(self, app: &TestApp, brief: &str) -> reqwest::Response {
        app.put_json(&format!("/api/v1/briefs/{brief}/card"), &self.json())
            .await
    }

    /// Saves the card on `brief` and answers the saved card.
    pub async fn save(self, app: &TestApp, brief: &str) -> Value {
        expect_status(self.put(app, brief).await, 200, "saving a card")
            .await
            .json()
            .await
            .unwrap()
    }
}
