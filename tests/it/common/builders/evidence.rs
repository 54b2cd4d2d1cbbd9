//! Evidence uploads: tool output sent raw (`?kind=&stage=`, the body as the tool wrote it) or a
//! `metrics` item sent as JSON, to a brief and, where it has several, one of its trials.

use serde_json::{json, Value};

use super::expect_status;
use crate::common::{fixture, TestApp};

enum Body {
    /// The bytes as a tool wrote them, with their content type.
    Raw { content_type: String, bytes: Vec<u8> },
    /// A `metrics` item, sent as JSON.
    Metrics(Value),
}

#[must_use]
pub struct EvidenceBuilder {
    kind: String,
    stage: Option<u8>,
    trial: Option<String>,
    collected_at: Option<String>,
    labels: Vec<(String, String)>,
    body: Body,
}

impl EvidenceBuilder {
    fn of(kind: &str, body: Body) -> Self {
        Self {
            kind: kind.to_owned(),
            stage: None,
            trial: None,
            collected_at: None,
            labels: Vec::new(),
            body,
        }
    }

    /// Tool output of `kind` sent raw, as `rentcheck collect` sends a file.
    pub fn raw(kind: &str, content_type: &str, bytes: Vec<u8>) -> Self {
        Self::of(
            kind,
            Body::Raw {
                content_type: content_type.to_owned(),
                bytes,
            },
        )
    }

    /// A file of tests/fixtures/ sent raw as `kind`.
    pub fn fixture(kind: &str, content_type: &str, rel: &str) -> Self {
        Self::raw(kind, content_type, fixture(rel))
    }

    /// A `vllm bench serve` result (a load point, a saved file) at stage 3, the load test.
    pub fn bench_serving(result: &Value) -> Self {
        Self::raw("bench-serving", "application/json", result.to_string().into_bytes()).stage(3)
    }

    /// A DCGM diagnostic that failed (PCIe), at stage 1: evidence that stops a brief (rule 2).
    pub fn failed_diag() -> Self {
        Self::fixture(
            "dcgm-diag",
            "application/json",
            "dcgm-diag/dcgm3-json-r2-pcie-fail.json",
        )
        .stage(1)
    }

    /// A `metrics` item of `metrics` (`{"serving.ttft_p95_ms": 300, …}`), sent as JSON.
    pub fn metrics(metrics: Value) -> Self {
        Self::of("metrics", Body::Metrics(metrics))
    }

    /// The stage of the acceptance test it is evidence for (1 to 5).
    pub fn stage(mut self, stage: u8) -> Self {
        self.stage = Some(stage);
        self
    }

    /// The trial it belongs to (needed when the brief has several).
    pub fn trial(mut self, trial: &str) -> Self {
        self.trial = Some(trial.to_owned());
        self
    }

    /// When the tool collected it (RFC 3339), rather than when it arrives.
    pub fn collected_at(mut self, at: &str) -> Self {
        self.collected_at = Some(at.to_owned());
        self
    }

    /// A label of the upload (`label.<name>=<value>` on a raw upload).
    pub fn label(mut self, name: &str, value: &str) -> Self {
        self.labels.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Uploads it to `brief` as the default engineer and answers the response, whatever it is.
    pub async fn post(self, app: &TestApp, brief: &str) -> reqwest::Response {
        match self.body {
            Body::Raw { content_type, bytes } => {
                let mut query = vec![format!("kind={}", self.kind)];
                query.extend(self.stage.map(|s| format!("stage={s}")));
                query.extend(self.trial.map(|t| format!("trial={t}")));
                query.extend(self.collected_at.map(|at| format!("collected_at={at}")));
                query.extend(self.labels.iter().map(|(k, v)| format!("label.{k}={v}")));
                app.post_raw_evidence(brief, &query.join("&"), &content_type, bytes)
                    .await
            }
            Body::Metrics(metrics) => {
                let mut body = json!({ "kind": self.kind, "data": { "metrics": metrics } });
                if let Some(stage) = self.stage {
                    body["stage"] = json!(stage);
                }
                if let Some(trial) = self.trial {
                    body["trial"] = json!(trial);
                }
                if let Some(at) = self.collected_at {
                    body["collected_at"] = json!(at);
                }
                if !self.labels.is_empty() {
                    body["labels"] = self.labels.into_iter().map(|(k, v)| (k, json!(v))).collect();
                }
                app.post_json(&format!("/api/v1/briefs/{brief}/evidence"), &body).await
            }
        }
    }

    /// Uploads it to `brief` and answers the stored item's JSON.
    pub async fn upload(self, app: &TestApp, brief: &str) -> Value {
        expect_status(self.post(app, brief).await, 201, "uploading evidence")
            .await
            .json()
            .await
            .unwrap()
    }

    /// Uploads it to `brief` and answers the stored item's id.
    pub async fn upload_id(self, app: &TestApp, brief: &str) -> String {
        self.upload(app, brief).await["id"].as_str().unwrap().to_owned()
    }
}
