//! Ledger entries: what a trial was billed (lines) and what it produced (outputs), posted to a
//! brief's ledger as JSON, or a bill exported as CSV (the ledger's own columns, or FOCUS).

use serde_json::{json, Value};

use super::expect_status;
use crate::common::TestApp;

/// One billed line.
#[must_use]
pub struct LedgerLine(Value);

impl LedgerLine {
    /// `gpus` GPUs of `resource` from `starts_at` to `ends_at` (RFC 3339), at `rate` per GPU-hour
    /// in USD.
    pub fn accelerator(resource: &str, starts_at: &str, ends_at: &str, gpus: u32, rate: &str) -> Self {
        Self(json!({
            "category": "accelerator", "resource": resource,
            "starts_at": starts_at, "ends_at": ends_at,
            "gpus": gpus, "rate_per_gpu_hour": rate, "currency": "USD"
        }))
    }

    /// One day, 1 to 2 November 2026, of `gpus` GPUs of `resource` at `rate` per GPU-hour in USD.
    pub fn accelerator_day(resource: &str, gpus: u32, rate: &str) -> Self {
        Self::accelerator(resource, "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z", gpus, rate)
    }

    /// A line of `category` (`host`, `storage`, …) that costs `amount` in USD.
    pub fn amount(category: &str, amount: &str) -> Self {
        Self(json!({ "category": category, "amount": amount, "currency": "USD" }))
    }

    /// Sets one field as the API names it, for what no setter names.
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.0[field] = value.into();
        self
    }

    /// The trial this line was billed for (rather than the post's trial).
    pub fn trial(self, trial: &str) -> Self {
        self.set("trial", trial)
    }

    pub fn currency(self, currency: &str) -> Self {
        self.set("currency", currency)
    }
}

/// One post to a brief's ledger: lines and outputs, for the post's trial when it names one.
#[must_use]
pub struct LedgerBuilder {
    body: Value,
}

impl Default for LedgerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl LedgerBuilder {
    pub fn new() -> Self {
        Self {
            body: Value::Object(Default::default()),
        }
    }

    /// The trial these lines and outputs belong to.
    pub fn trial(mut self, trial: &str) -> Self {
        self.body["trial"] = json!(trial);
        self
    }

    /// One more billed line.
    pub fn line(mut self, line: LedgerLine) -> Self {
        match self.body.get_mut("lines").and_then(Value::as_array_mut) {
            Some(lines) => lines.push(line.0),
            None => self.body["lines"] = json!([line.0]),
        }
        self
    }

    /// An output count (`accepted`, `rejected`, `retries`, `failed_jobs`) or `idle_hours`.
    pub fn output(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.body["outputs"][name] = value.into();
        self
    }

    /// Jobs the trial produced that were accepted.
    pub fn accepted(self, jobs: u64) -> Self {
        self.output("accepted", jobs)
    }

    /// GPU-hours billed but idle, a decimal string.
    pub fn idle_hours(self, hours: &str) -> Self {
        self.output("idle_hours", hours)
    }

    /// The post as the API takes it.
    pub fn json(&self) -> Value {
        self.body.clone()
    }

    /// Posts it to `brief`'s ledger as the default engineer and answers the response, whatever it is.
    pub async fn post(self, app: &TestApp, brief: &str) -> reqwest::Response {
        app.post_json(&format!("/api/v1/briefs/{brief}/ledger"), &self.body)
            .await
    }

    /// Posts it to `brief`'s ledger and answers the ledger's reply.
    pub async fn save(self, app: &TestApp, brief: &str) -> Value {
        expect_status(self.post(app, brief).await, 201, "posting to the ledger")
            .await
            .json()
            .await
            .unwrap()
    }
}

/// A bill as CSV, posted to a brief's ledger: the ledger's own columns, or an export another tool
/// wrote (`format=focus&…` in the query).
#[must_use]
pub struct LedgerCsv {
    query: String,
    text: String,
}

impl LedgerCsv {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            query: String::new(),
            text: text.into(),
        }
    }

    /// The import's query (`format=focus&trial=…`), without its `?`.
    pub fn query(mut self, query: &str) -> Self {
        self.query = query.to_owned();
        self
    }

    /// Posts it to `brief`'s ledger with `client` and answers the response, whatever it is.
    pub async fn post_with(self, client: &reqwest::Client, app: &TestApp, brief: &str) -> reqwest::Response {
        let query = if self.query.is_empty() {
            String::new()
        } else {
            format!("?{}", self.query)
        };
        client
            .post(app.url(&format!("/api/v1/briefs/{brief}/ledger{query}")))
            .header("content-type", "text/csv")
            .body(self.text)
            .send()
            .await
            .unwrap()
    }

    /// Posts it to `brief`'s ledger as the default engineer.
    pub async fn post(self, app: &TestApp, brief: &str) -> reqwest::Response {
        self.post_with(&app.client, app, brief).await
    }
}
