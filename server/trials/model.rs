//! Trials: one allocation under test against a brief's card (provider, GPU, count, billing, rate).
//! The types and their validation. No I/O.
//!
//! A trial with no GPU is the sizing's *suggestion*: the first fitting option the card's tools can
//! test (DCGM and nvidia-smi are NVIDIA-only), shown as suggested until someone confirms or changes it.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::{
    ids::{BriefId, TrialId},
    sizing::{self, GpuSpec, Sizing, SizingOption},
    text_enum,
    validation::{FieldError, FieldReader, Input},
};

text_enum!(
    /// How the allocation is billed.
    Billing { OnDemand => "on-demand", Spot => "spot", Reserved => "reserved", Serverless => "serverless" }
);
text_enum!(
    /// Where the trial is: planned, running (evidence or ledger lines arrive), ended.
    TrialStatus { Planned => "planned", Running => "running", Ended => "ended" }
);

pub const MAX_NAME: usize = 200;
pub const MAX_NOTES: usize = 10_000;
pub const MAX_GPU_COUNT: i64 = 4096;

/// A trial's fields after validation.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TrialFields {
    pub name: String,
    pub provider: String,
    pub region: Option<String>,
    /// Null: the trial tests the sizing's suggestion.
    pub gpu: Option<String>,
    pub gpu_count: Option<i32>,
    pub billing: Billing,
    /// A decimal string, e.g. "2.99".
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub rate_per_gpu_hour: Option<Decimal>,
    pub currency: String,
    pub allocation_boundary: String,
    pub status: TrialStatus,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub notes: Option<String>,
    #[schema(value_type = Option<Uuid>)]
    pub rerun_of: Option<TrialId>,
}

/// A stored trial.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Trial {
    #[schema(value_type = Uuid)]
    pub id: TrialId,
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// 1 for the brief's first trial (the one `trial_gpu` describes), then 2, 3, …
    pub position: i32,
    #[serde(flatten)]
    pub fields: TrialFields,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The allocation a trial tests: its GPU and count, or the sizing's suggestion.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub gpu: &'static GpuSpec,
    pub count: u32,
    /// Taken from the sizing because the trial names no GPU; pages say so until it is confirmed.
    pub suggested: bool,
    /// The sizing says this allocation cannot hold the brief (people test what they can get).
    pub under_sized: bool,
}

impl Allocation {
    /// The allocation of a trial naming `gpu` × `count` (either may be absent) for a brief sized as
    /// `sizing`. `None` only when the sizing has no options at all.
    pub fn resolve(gpu: Option<&str>, count: Option<i32>, sizing: &Sizing) -> Option<Self> {
        let count = count.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
        let (spec, count, suggested) = match gpu.and_then(sizing::gpu_by_name) {
            Some(spec) => {
                let count = count
                    .or_else(|| option_for(sizing, &spec.model).map(|o| o.count))
                    .unwrap_or(1);
                (spec, count, false)
            }
            None => {
                let option = suggested_option(sizing)?;
                (sizing::gpu_by_name(&option.gpu)?, count.unwrap_or(option.count), true)
            }
        };
        let under_sized = match option_for(sizing, &spec.model) {
            Some(o) => !o.fits || count < o.count,
            None => true,
        };
        Some(Self {
            gpu: spec,
            count,
            suggested,
            under_sized,
        })
    }

    /// "8 × H200 SXM".
    pub fn label(&self) -> String {
        format!("{} × {}", self.count, self.gpu.model)
    }

    /// The GPUs the sizing says one unit of this GPU needs (for the decision's unit count).
    pub fn sized_count(&self, sizing: &Sizing) -> u32 {
        option_for(sizing, &self.gpu.model)
            .map(|o| o.count)
            .unwrap_or(self.count)
    }
}

fn option_for<'a>(sizing: &'a Sizing, gpu: &str) -> Option<&'a SizingOption> {
    sizing.options.iter().find(|o| o.gpu == gpu)
}

/// The option a trial without a GPU tests: the first fitting NVIDIA data-centre option (the card's
/// tools, DCGM and nvidia-smi, test NVIDIA GPUs, and DCGM's diagnostics data-centre ones: a
/// GeForce card is what people rent for a model, not what the card can check), else the first
/// fitting NVIDIA option, else the first fitting option, else the first option.
pub fn suggested_option(sizing: &Sizing) -> Option<&SizingOption> {
    let nvidia = |o: &&SizingOption| sizing::gpu_by_name(&o.gpu).is_some_and(|g| g.vendor == "NVIDIA");
    let data_centre = |o: &&SizingOption| {
        sizing::gpu_by_name(&o.gpu).is_some_and(|g| g.vendor == "NVIDIA" && !g.form_factor.contains("consumer"))
    };
    let fitting = || sizing.options.iter().filter(|o| o.fits);
    fitting()
        .find(data_centre)
        .or_else(|| fitting().find(nvidia))
        .or_else(|| sizing.options.iter().find(|o| o.fits))
        .or(sizing.options.first())
}

/// Field names a trial accepts (the API's JSON and the form's inputs).
pub const TRIAL_FIELDS: [&str; 14] = [
    "name",
    "provider",
    "region",
    "gpu",
    "gpu_count",
    "billing",
    "rate_per_gpu_hour",
    "currency",
    "allocation_boundary",
    "status",
    "started_at",
    "ended_at",
    "notes",
    "rerun_of",
];
/// Fields the API returns that a client may send back in a PUT; they are ignored.
const READ_ONLY_FIELDS: [&str; 8] = [
    "id",
    "brief_id",
    "position",
    "created_at",
    "updated_at",
    "allocation",
    "suggested",
    "links",
];

/// What a new trial starts from when a field is not given: the brief's currency and allocation
/// boundary, and the next free name.
pub struct TrialDefaults {
    pub currency: String,
    pub allocation_boundary: String,
    pub name: String,
}

/// Checks every field and returns the trial, or every problem found.
pub fn validate(input: &Input<'_>, defaults: &TrialDefaults) -> Result<TrialFields, Vec<FieldError>> {
    let mut c = FieldReader::new(input);
    if let Input::Json(map) = input {
        for key in map.keys() {
            if !TRIAL_FIELDS.contains(&key.as_str()) && !READ_ONLY_FIELDS.contains(&key.as_str()) {
                c.fail(key, "is not a trial field");
            }
        }
    }
    let name = c.text("name", MAX_NAME).unwrap_or_else(|| defaults.name.clone());
    let provider = c.text("provider", MAX_NAME).unwrap_or_default();
    let region = c.text("region", MAX_NAME);
    let gpu = c.text("gpu", MAX_NAME).and_then(|g| match sizing::gpu_by_name(&g) {
        Some(spec) => Some(spec.model.clone()),
        None => {
            c.fail("gpu", "is not in the GPU catalogue");
            None
        }
    });
    let gpu_count = c
        .positive_integer("gpu_count", MAX_GPU_COUNT)
        .and_then(|n| i32::try_from(n).ok());
    let billing: Option<Billing> = c.choice("billing", &names(Billing::ALL, Billing::as_str), false);
    let rate_per_gpu_hour = c.money("rate_per_gpu_hour", 1_000_000);
    let currency = read_currency(&mut c, &defaults.currency);
    let allocation_boundary = read_allocation_boundary(&mut c);
    let status: Option<TrialStatus> = c.choice("status", &names(TrialStatus::ALL, TrialStatus::as_str), false);
    let started_at = time(&mut c, "started_at");
    let ended_at = time(&mut c, "ended_at");
    if let (Some(s), Some(e)) = (started_at, ended_at) {
        if e < s {
            c.fail("ended_at", "must not be before started_at");
        }
    }
    let notes = c.multiline_text("notes", MAX_NOTES);
    let rerun_of = c.text("rerun_of", 64).and_then(|s| match s.parse::<TrialId>() {
        Ok(id) => Some(id),
        Err(_) => {
            c.fail("rerun_of", "must be the id of a trial of this brief");
            None
        }
    });
    if name.trim().is_empty() {
        c.fail("name", "is required");
    }
    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    let status = status.unwrap_or(TrialStatus::Planned);
    Ok(TrialFields {
        name,
        provider,
        region,
        gpu,
        gpu_count,
        billing: billing.unwrap_or(Billing::OnDemand),
        rate_per_gpu_hour,
        currency: currency.unwrap_or_else(|| defaults.currency.clone()),
        allocation_boundary: allocation_boundary.unwrap_or_else(|| defaults.allocation_boundary.clone()),
        // Ending a trial stamps when, unless the caller said.
        ended_at: ended_at.or((status == TrialStatus::Ended).then(Utc::now)),
        started_at,
        status,
        notes,
        rerun_of,
    })
}

/// The rate's currency, upper-cased: three letters, and the brief's own (one currency per brief:
/// a rate in another one is refused, never converted silently).
fn read_currency(c: &mut FieldReader<'_>, brief: &str) -> Option<String> {
    let currency = c.text("currency", 3).map(|s| s.to_ascii_uppercase());
    if let Some(cur) = &currency {
        if cur.len() != 3 || !cur.chars().all(|ch| ch.is_ascii_alphabetic()) {
            c.fail("currency", "must be a three-letter ISO 4217 code such as USD");
        } else if cur != brief {
            c.fail(
                "currency",
                format!(
                    "is {cur}, but this brief's money is in {brief}; give the rate in {brief} (convert it at \
                     the rate you pay) so costs stay comparable"
                ),
            );
        }
    }
    currency
}

/// The kind of allocation the trial rents, one of the brief's kinds.
fn read_allocation_boundary(c: &mut FieldReader<'_>) -> Option<String> {
    let boundary = c.text("allocation_boundary", MAX_NAME);
    if let Some(b) = &boundary {
        if !["serverless", "vm", "dedicated-node", "cluster"].contains(&b.as_str()) {
            c.fail(
                "allocation_boundary",
                "must be one of: serverless, vm, dedicated-node, cluster",
            );
        }
    }
    boundary
}

fn names<T: Copy>(all: &[T], name: fn(&T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(name).collect()
}

/// An RFC 3339 time, or a plain date (midnight UTC), as a form's date input sends it.
fn time(c: &mut FieldReader<'_>, field: &str) -> Option<DateTime<Utc>> {
    let text = c.text(field, 64)?;
    if let Ok(t) = DateTime::parse_from_rfc3339(&text) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(&text, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
    }
    c.fail(
        field,
        "must be a date (2026-12-01) or a time with its offset (2026-12-01T09:00:00Z)",
    );
    None
}

/// The name a new trial gets when none is given: "Trial N" for the next free N.
pub fn next_name(existing: &[String]) -> String {
    (existing.len() + 1..)
        .map(|n| format!("Trial {n}"))
        .find(|name| !existing.contains(name))
        .unwrap_or_else(|| "Trial".to_owned())
}

/// The trial an upload or a ledger line goes to, from what the caller said and what it may.
/// `named`: the trial the request names; `token_trial`: the trial a token is scoped to.
pub fn resolve_target(
    named: Option<TrialId>,
    token_trial: Option<TrialId>,
    trials: &[(TrialId, String)],
) -> Result<TrialId, TargetError> {
    if let (Some(n), Some(t)) = (named, token_trial) {
        if n != t {
            return Err(TargetError::OtherTrial);
        }
    }
    match named.or(token_trial) {
        Some(id) if trials.iter().any(|(t, _)| *t == id) => Ok(id),
        Some(_) => Err(TargetError::Unknown(names_of(trials))),
        None => match trials {
            [(only, _)] => Ok(*only),
            _ => Err(TargetError::Ambiguous(names_of(trials))),
        },
    }
}

fn names_of(trials: &[(TrialId, String)]) -> String {
    trials
        .iter()
        .map(|(id, name)| format!("{name} ({id})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a request could not be placed on a trial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// The brief has several trials and the request named none: which ones there are.
    Ambiguous(String),
    /// The named trial is not one of the brief's.
    Unknown(String),
    /// A token scoped to one trial named another.
    OtherTrial,
}

impl TargetError {
    /// The per-field message for a 422 (or 403 for a token scoped to another trial).
    pub fn message(&self) -> String {
        match self {
            TargetError::Ambiguous(names) => {
                format!("this brief has several trials; name one with `trial`: {names}")
            }
            TargetError::Unknown(names) => format!("is not a trial of this brief; its trials are: {names}"),
            TargetError::OtherTrial => "this token is scoped to another trial".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use uuid::Uuid;

    use super::*;

    fn defaults() -> TrialDefaults {
        TrialDefaults {
            currency: "USD".into(),
            allocation_boundary: "vm".into(),
            name: "Trial 2".into(),
        }
    }

    fn read_one<T>(field: &str, value: &str, read: impl FnOnce(&mut FieldReader<'_>) -> T) -> (T, Vec<String>) {
        let form = HashMap::from([(field.to_owned(), value.to_owned())]);
        let input = Input::Form(&form);
        let mut c = FieldReader::new(&input);
        let out = read(&mut c);
        (out, c.errors.into_iter().map(|e| e.message).collect())
    }

    #[test]
    fn the_rate_is_in_the_briefs_currency_or_refused() {
        let (cur, errors) = read_one("currency", "usd", |c| read_currency(c, "USD"));
        assert_eq!((cur.as_deref(), errors.len()), (Some("USD"), 0));
        let (_, errors) = read_one("currency", "EUR", |c| read_currency(c, "USD"));
        assert!(
            errors[0].starts_with("is EUR, but this brief's money is in USD"),
            "{errors:?}"
        );
        let (_, errors) = read_one("currency", "U$D", |c| read_currency(c, "USD"));
        assert_eq!(errors, ["must be a three-letter ISO 4217 code such as USD"]);
    }

    #[test]
    fn the_allocation_boundary_is_one_of_the_briefs_kinds() {
        let (b, errors) = read_one("allocation_boundary", "cluster", read_allocation_boundary);
        assert_eq!((b.as_deref(), errors.len()), (Some("cluster"), 0));
        let (_, errors) = read_one("allocation_boundary", "mainframe", read_allocation_boundary);
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn a_form_trial_is_read_with_its_defaults() {
        let form = HashMap::from([
            ("provider".to_owned(), "Lambda".to_owned()),
            ("gpu".to_owned(), "H100 SXM".to_owned()),
            ("gpu_count".to_owned(), "2".to_owned()),
            ("rate_per_gpu_hour".to_owned(), "2.99".to_owned()),
        ]);
        let t = validate(&Input::Form(&form), &defaults()).unwrap();
        assert_eq!(t.name, "Trial 2");
        assert_eq!(t.gpu.as_deref(), Some("H100 SXM"));
        assert_eq!(t.gpu_count, Some(2));
        assert_eq!(t.rate_per_gpu_hour, Some(Decimal::new(299, 2)));
        assert_eq!(t.billing, Billing::OnDemand);
        assert_eq!(t.status, TrialStatus::Planned);
        assert_eq!(t.currency, "USD");
    }

    #[test]
    fn every_bad_field_is_named() {
        let form = HashMap::from([
            ("gpu".to_owned(), "H9000".to_owned()),
            ("gpu_count".to_owned(), "0".to_owned()),
            ("rate_per_gpu_hour".to_owned(), "$2.99".to_owned()),
            ("billing".to_owned(), "monthly".to_owned()),
            ("started_at".to_owned(), "2026-11-20 09:00".to_owned()),
        ]);
        let errors = validate(&Input::Form(&form), &defaults()).unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["gpu", "gpu_count", "billing", "rate_per_gpu_hour", "started_at"]
        );
        assert!(errors[3].message.contains("no currency sign"), "{errors:?}");
    }

    #[test]
    fn a_rate_in_another_currency_is_refused_not_mixed() {
        let form = HashMap::from([
            ("rate_per_gpu_hour".to_owned(), "2.10".to_owned()),
            ("currency".to_owned(), "eur".to_owned()),
        ]);
        let errors = validate(&Input::Form(&form), &defaults()).unwrap_err();
        assert_eq!(errors[0].field, "currency");
        assert!(
            errors[0].message.contains("EUR") && errors[0].message.contains("USD"),
            "{errors:?}"
        );
        let same = HashMap::from([("currency".to_owned(), "usd".to_owned())]);
        assert_eq!(validate(&Input::Form(&same), &defaults()).unwrap().currency, "USD");
    }

    #[test]
    fn ending_a_trial_stamps_the_time() {
        let form = HashMap::from([("status".to_owned(), "ended".to_owned())]);
        let t = validate(&Input::Form(&form), &defaults()).unwrap();
        assert!(t.ended_at.is_some());
    }

    #[test]
    fn the_next_name_skips_taken_ones() {
        assert_eq!(next_name(&[]), "Trial 1");
        assert_eq!(next_name(&["Trial 1".into()]), "Trial 2");
        assert_eq!(next_name(&["Trial 2".into()]), "Trial 3");
        assert_eq!(next_name(&["a".into(), "Trial 3".into()]), "Trial 4");
    }

    #[test]
    fn uploads_land_on_the_trial_they_may() {
        let (a, b) = (TrialId::from(Uuid::now_v7()), TrialId::from(Uuid::now_v7()));
        let one = [(a, "Trial 1".to_owned())];
        let two = [(a, "Trial 1".to_owned()), (b, "Trial 2".to_owned())];
        assert_eq!(resolve_target(None, None, &one), Ok(a), "one trial needs no name");
        assert!(matches!(resolve_target(None, None, &two), Err(TargetError::Ambiguous(n)) if n.contains("Trial 2")));
        assert_eq!(
            resolve_target(None, Some(b), &two),
            Ok(b),
            "a trial token needs no name"
        );
        assert_eq!(resolve_target(Some(b), Some(b), &two), Ok(b));
        assert_eq!(resolve_target(Some(a), Some(b), &two), Err(TargetError::OtherTrial));
        assert!(matches!(
            resolve_target(Some(TrialId::from(Uuid::nil())), None, &two),
            Err(TargetError::Unknown(_))
        ));
    }

    #[test]
    fn a_trial_without_a_gpu_suggests_a_fitting_nvidia_option() {
        let llama70 = sizing::model_by_hf_id("meta-llama/Llama-3.1-70B-Instruct").unwrap();
        let brief_sizing = sizing::size(&sizing::SizingInput::from_catalog(
            sizing::WorkloadKind::RealtimeInference,
            sizing::Precision::Bf16,
            llama70,
            8192,
            32,
        ));
        let a = Allocation::resolve(None, None, &brief_sizing).unwrap();
        assert!(a.suggested);
        assert_eq!(a.gpu.vendor, "NVIDIA");
        assert!(
            !a.gpu.form_factor.contains("consumer"),
            "a data-centre GPU DCGM can check, not a GeForce card: {}",
            a.label()
        );
        assert!(!a.under_sized);
        let small = Allocation::resolve(Some("L4"), Some(1), &brief_sizing).unwrap();
        assert!(!small.suggested);
        assert!(small.under_sized, "one L4 cannot hold a 70B model");
        assert_eq!(small.label(), "1 × L4");
    }
}
