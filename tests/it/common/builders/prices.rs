//! Price sheets: the offers a provider quotes, imported by a manager as CSV (rentcheck's own
//! columns, or SkyPilot's catalogue with `format=skypilot`).

use rentcheck::auth::Role;

use super::expect_status;
use crate::common::{bearer_client, TestApp};

/// The columns of rentcheck's own price sheet.
pub const PRICE_HEADER: &str = "provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source\n";

/// One offer of a sheet: `gpu_count` × `gpu` at `provider`, on demand in USD from 1 November 2026
/// unless a setter says otherwise.
#[must_use]
pub struct PriceRow {
    provider: String,
    gpu: String,
    gpu_count: u32,
    billing: String,
    rate: String,
    currency: String,
    region: String,
    valid_from: String,
    source: String,
}

impl PriceRow {
    pub fn new(provider: &str, gpu: &str, gpu_count: u32, rate_per_gpu_hour: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            gpu: gpu.to_owned(),
            gpu_count,
            billing: "on-demand".to_owned(),
            rate: rate_per_gpu_hour.to_owned(),
            currency: "USD".to_owned(),
            region: String::new(),
            valid_from: "2026-11-01".to_owned(),
            source: "quote".to_owned(),
        }
    }

    /// `on-demand`, `reserved`, `spot`, …
    pub fn billing(mut self, billing: &str) -> Self {
        self.billing = billing.to_owned();
        self
    }

    /// A reserved (committed) rate.
    pub fn reserved(self) -> Self {
        self.billing("reserved")
    }

    pub fn currency(mut self, currency: &str) -> Self {
        self.currency = currency.to_owned();
        self
    }

    pub fn region(mut self, region: &str) -> Self {
        self.region = region.to_owned();
        self
    }

    /// The day the price holds from (`YYYY-MM-DD`).
    pub fn valid_from(mut self, day: &str) -> Self {
        self.valid_from = day.to_owned();
        self
    }

    /// Where the price comes from (a quote, a pricing page).
    pub fn source(mut self, source: &str) -> Self {
        self.source = source.to_owned();
        self
    }

    fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{}\n",
            self.provider,
            self.gpu,
            self.gpu_count,
            self.billing,
            self.rate,
            self.currency,
            self.region,
            self.valid_from,
            self.source
        )
    }
}

/// A price sheet, imported through `POST /api/v1/prices` as a manager.
#[must_use]
pub struct PriceSheet {
    query: String,
    text: String,
}

impl Default for PriceSheet {
    fn default() -> Self {
        Self::new()
    }
}

impl PriceSheet {
    /// A sheet of rentcheck's own columns with no rows yet.
    pub fn new() -> Self {
        Self::csv(PRICE_HEADER)
    }

    /// A sheet as `text` has it, header and all (a hand-written sheet, another tool's catalogue).
    pub fn csv(text: impl Into<String>) -> Self {
        Self {
            query: String::new(),
            text: text.into(),
        }
    }

    /// One more offer.
    pub fn row(mut self, row: PriceRow) -> Self {
        self.text.push_str(&row.csv());
        self
    }

    /// More rows as CSV lines of the sheet's columns, each ending in a newline.
    pub fn rows(mut self, lines: &str) -> Self {
        self.text.push_str(lines);
        self
    }

    /// The import's query (`format=skypilot`, `preview=true`), without its `?`.
    pub fn query(mut self, query: &str) -> Self {
        self.query = query.to_owned();
        self
    }

    /// The sheet's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Imports it with `client` (a person's bearer token or session) and answers the response,
    /// whatever it is.
    pub async fn post_with(self, client: &reqwest::Client, app: &TestApp) -> reqwest::Response {
        let path = if self.query.is_empty() {
            "/api/v1/prices".to_owned()
        } else {
            format!("/api/v1/prices?{}", self.query)
        };
        client
            .post(app.url(&path))
            .header("content-type", "text/csv")
            .body(self.text)
            .send()
            .await
            .unwrap()
    }

    /// Imports it as a person of `role` and answers the response, whatever it is.
    pub async fn import_as(self, app: &TestApp, role: Role) -> reqwest::Response {
        self.post_with(&bearer_client(&app.token(role, None).await), app).await
    }

    /// Imports it as a manager and answers the response, whatever it is.
    pub async fn post(self, app: &TestApp) -> reqwest::Response {
        self.import_as(app, Role::Manager).await
    }

    /// Imports it as a manager, which must succeed.
    pub async fn import(self, app: &TestApp) {
        expect_status(self.post(app).await, 201, "importing a price sheet").await;
    }
}
