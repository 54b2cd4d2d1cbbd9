//! Briefs: `BriefBuilder::new()` is the complete, valid brief of `common::valid_brief` (Llama 3.1
//! 70B in bf16, 8k context, 16 sequences); each setter changes one thing a test cares about.

use serde_json::Value;

use super::expect_status;
use crate::common::{valid_brief, TestApp};

#[must_use]
pub struct BriefBuilder {
    body: Value,
}

impl Default for BriefBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BriefBuilder {
    pub fn new() -> Self {
        Self { body: valid_brief() }
    }

    /// Sets one field of the brief as the API names it, for what no setter below names.
    pub fn set(mut self, field: &str, value: impl Into<Value>) -> Self {
        self.body[field] = value.into();
        self
    }

    /// Leaves one field out of the brief.
    pub fn without(mut self, field: &str) -> Self {
        if let Some(body) = self.body.as_object_mut() {
            body.remove(field);
        }
        self
    }

    pub fn name(self, name: impl Into<String>) -> Self {
        self.set("name", name.into())
    }

    /// Who asks for the capacity (the brief's `owner` field, an address or a team).
    pub fn owner(self, owner: impl Into<String>) -> Self {
        self.set("owner", owner.into())
    }

    /// `realtime-inference`, `batch-inference`, …
    pub fn workload_kind(self, kind: &str) -> Self {
        self.set("workload_kind", kind)
    }

    /// The model served, by its hub name.
    pub fn model(self, name: impl Into<String>) -> Self {
        self.set("model_name", name.into())
    }

    /// The catalogue entry the form's model picker chose.
    pub fn catalog_model(self, name: &str) -> Self {
        self.set("catalog_model", name)
    }

    pub fn model_revision(self, revision: &str) -> Self {
        self.set("model_revision", revision)
    }

    /// The model's size in billions of parameters.
    pub fn params_b(self, billions: f64) -> Self {
        self.set("params_b", billions)
    }

    /// `bf16`, `fp8`, …
    pub fn precision(self, precision: &str) -> Self {
        self.set("precision", precision)
    }

    pub fn context_length(self, tokens: u32) -> Self {
        self.set("context_length", tokens)
    }

    /// Sequences served at once.
    pub fn concurrency(self, sequences: u32) -> Self {
        self.set("concurrency", sequences)
    }

    /// The model's attention shape: layers, KV heads and the size of a head.
    pub fn attention(self, layers: u32, kv_heads: u32, head_dim: u32) -> Self {
        self.set("num_layers", layers)
            .set("num_kv_heads", kv_heads)
            .set("head_dim", head_dim)
    }

    /// Leaves the explicit attention shape out, for a brief whose `model_config` gives it.
    pub fn without_attention(self) -> Self {
        self.without("num_layers").without("num_kv_heads").without("head_dim")
    }

    /// A mixture of experts: `experts` in all, `per_token` of them active for each token.
    pub fn experts(self, experts: u32, per_token: u32) -> Self {
        self.set("num_experts", experts).set("experts_per_token", per_token)
    }

    /// The serving targets, whole (`{"ttft_p95_ms": …, "itl_p95_ms": …, …}`).
    pub fn targets(self, targets: Value) -> Self {
        self.set("targets", targets)
    }

    /// Where the data may go: `private-network`, `shared-ok`, …
    pub fn data_boundary(self, boundary: &str) -> Self {
        self.set("data_boundary", boundary)
    }

    pub fn only_needs_model_output(self, only: bool) -> Self {
        self.set("only_needs_model_output", only)
    }

    pub fn needs_host_control(self, needs: bool) -> Self {
        self.set("needs_host_control", needs)
    }

    /// A brief whose data may run on shared hardware (only the model's output is needed and the
    /// boundary is `shared-ok`): one the review can decide on a shared trial.
    pub fn shared_hardware_ok(self) -> Self {
        self.only_needs_model_output(true).data_boundary("shared-ok")
    }

    /// The GPU the first trial runs on, and how many.
    pub fn trial_gpu(self, gpu: &str, count: u32) -> Self {
        self.set("trial_gpu", gpu).set("trial_gpu_count", count)
    }

    /// How many GPUs the first trial runs on (of the brief's `trial_gpu`).
    pub fn trial_gpu_count(self, count: u32) -> Self {
        self.set("trial_gpu_count", count)
    }

    /// The most a unit of work may cost, a decimal string.
    pub fn max_cost_per_job(self, amount: &str) -> Self {
        self.set("max_cost_per_job", amount)
    }

    pub fn currency(self, currency: &str) -> Self {
        self.set("currency", currency)
    }

    pub fn cost_unit(self, unit: &str) -> Self {
        self.set("cost_unit", unit)
    }

    pub fn allocation_boundary(self, boundary: &str) -> Self {
        self.set("allocation_boundary", boundary)
    }

    pub fn restore_plan(self, plan: impl Into<String>) -> Self {
        self.set("restore_plan", plan.into())
    }

    pub fn fallback_plan(self, plan: impl Into<String>) -> Self {
        self.set("fallback_plan", plan.into())
    }

    /// The Kubernetes manifest the trial runs from.
    pub fn k8s_manifest(self, manifest: impl Into<String>) -> Self {
        self.set("k8s_manifest", manifest.into())
    }

    /// The busiest the service is expected to be, in requests per second.
    pub fn expected_peak_rps(self, rps: f64) -> Self {
        self.set("expected_peak_rps", rps)
    }

    /// What a managed API charges for a million tokens, a decimal string: the break-even's other side.
    pub fn api_price_per_million_tokens(self, price: &str) -> Self {
        self.set("api_price_per_million_tokens", price)
    }

    /// The margin kept above the expected peak, in per cent.
    pub fn headroom_pct(self, pct: f64) -> Self {
        self.set("headroom_pct", pct)
    }

    /// What a managed API charges per million input and output tokens, decimal strings.
    pub fn api_prices_per_million(self, input: &str, output: &str) -> Self {
        self.set("api_price_input_per_million", input)
            .set("api_price_output_per_million", output)
    }

    /// The KV cache's data type: `auto` (the model's own) or `fp8`.
    pub fn kv_cache_dtype(self, dtype: &str) -> Self {
        self.set("kv_cache_dtype", dtype)
    }

    pub fn speculative_decoding(self, on: bool) -> Self {
        self.set("speculative_decoding", on)
    }

    /// The model's `config.json`, as the form's paste box takes it.
    pub fn model_config(self, config: Value) -> Self {
        self.set("model_config", config)
    }

    /// The brief as the API takes it, for a test that sends it itself (another client, a PUT).
    pub fn json(&self) -> Value {
        self.body.clone()
    }

    /// Posts the brief as the default engineer and answers the response, whatever it is.
    pub async fn post(self, app: &TestApp) -> reqwest::Response {
        app.post_json("/api/v1/briefs", &self.body).await
    }

    /// Saves the brief over brief `id` (an edit, the whole brief sent as the form does) as the
    /// default engineer and answers the response, whatever it is.
    pub async fn put(self, app: &TestApp, id: &str) -> reqwest::Response {
        app.put_json(&format!("/api/v1/briefs/{id}"), &self.body).await
    }

    /// Creates the brief as the default engineer (its owner) and answers its JSON.
    pub async fn create(self, app: &TestApp) -> Value {
        let res = expect_status(self.post(app).await, 201, "creating a brief").await;
        res.json().await.unwrap()
    }

    /// Creates the brief and answers its id.
    pub async fn create_id(self, app: &TestApp) -> String {
        self.create(app).await["id"].as_str().unwrap().to_owned()
    }
}
