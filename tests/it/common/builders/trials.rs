//! Trials: a brief starts with one (from its `trial_gpu`); `TrialBuilder::new()` adds another and
//! `TrialBuilder::first_of` edits the first one, sending the whole trial back as the form does.

use serde_json::Value;

use super::expect_status;
use crate::common::TestApp;

#[must_use]
pub struct TrialBuilder {
    body: Value,
}

impl Default for TrialBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// A brief's trials, in order, as the API lists them.
pub async fn trials_of(app: &TestApp, brief: &str) -> Vec<Value> {
    let res = expect_status(
        app.get(&format!("/api/v1/briefs/{brief}/trials")).await,
        200,
        "listing trials",
    )
    .await;
    res.json::<Value>().await.unwrap()["items"].as_array().unwrap().clone()
}

/// The brief's first trial (the one it starts with), as the API lists it.
pub async fn first_trial(app: &TestApp, brief: &str) -> Value {
    trials_of(app, brief).await.remove(0)
}

/// The id of the brief's first trial.
pub async fn first_trial_id(app: &TestApp, brief: &str) -> String {
    first_trial(app, brief).await["id"].as_str().unwrap().to_owned()
}

impl TrialBuilder {
    /// A new trial with nothing set: the server names it and suggests its allocation.
    pub fn new() -> Self {
        Self {
            body: Value::Object(Default::default()),
        }
    }

    /// An edit of `trial` (as the API answered it), every field kept unless a setter changes it.
    pub fn edit(trial: &Value) -> Self {
        Self { body: trial.clone() }
    }

    /// An edit of the brief's first trial.
    pub async fn first_of(app: &TestApp, brief: &str) -> Self {
        Self::edit(&first_trial(app, brief).await)
    }

    /// Sets one field as the API names it, for what no setter below names.
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.body[field] = value.into();
        self
    }

    pub fn name(self, name: impl Into<String>) -> Self {
        self.set("name", name.into())
    }

    pub fn provider(self, provider: &str) -> Self {
        self.set("provider", provider)
    }

    /// The GPU the trial runs on and how many of them.
    pub fn gpus(self, gpu: &str, count: u32) -> Self {
        self.gpu(gpu).set("gpu_count", count)
    }

    /// The GPU the trial runs on, its count left to the server.
    pub fn gpu(self, gpu: &str) -> Self {
        self.set("gpu", gpu)
    }

    /// What one GPU-hour costs, a decimal string.
    pub fn rate_per_gpu_hour(self, rate: &str) -> Self {
        self.set("rate_per_gpu_hour", rate)
    }

    /// `on-demand`, `reserved`, `spot`, …
    pub fn billing(self, billing: &str) -> Self {
        self.set("billing", billing)
    }

    pub fn currency(self, currency: &str) -> Self {
        self.set("currency", currency)
    }

    /// No rate of its own: the review prices the trial from the imported price sheets.
    pub fn without_rate(self) -> Self {
        self.set("rate_per_gpu_hour", Value::Null)
    }

    /// A rerun of an earlier trial.
    pub fn rerun_of(self, trial: &str) -> Self {
        self.set("rerun_of", trial)
    }

    /// Adds the trial to `brief` as the default engineer and answers the response, whatever it is.
    pub async fn post(self, app: &TestApp, brief: &str) -> reqwest::Response {
        app.post_json(&format!("/api/v1/briefs/{brief}/trials"), &self.body)
            .await
    }

    /// Adds the trial to `brief` and answers its JSON.
    pub async fn add(self, app: &TestApp, brief: &str) -> Value {
        expect_status(self.post(app, brief).await, 201, "adding a trial")
            .await
            .json()
            .await
            .unwrap()
    }

    /// Adds the trial to `brief` and answers its id.
    pub async fn add_id(self, app: &TestApp, brief: &str) -> String {
        self.add(app, brief).await["id"].as_str().unwrap().to_owned()
    }

    /// Sends an edit (`TrialBuilder::edit`, `first_of`) as the default engineer and answers the
    /// response, whatever it is.
    pub async fn put(self, app: &TestApp) -> reqwest::Response {
        let id = self.body["id"].as_str().expect("an edit of a trial the API answered");
        app.put_json(&format!("/api/v1/trials/{id}"), &self.body).await
    }

    /// Saves an edit (`TrialBuilder::edit`, `first_of`) and answers the trial's id.
    pub async fn save(self, app: &TestApp) -> String {
        let id = self.body["id"]
            .as_str()
            .expect("an edit of a trial the API answered")
            .to_owned();
        expect_status(self.put(app).await, 200, "editing a trial").await;
        id
    }
}
