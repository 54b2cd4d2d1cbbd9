//! Price sheets: the CSV a person imports, its rows checked one by one (all or nothing), and the
//! price of an allocation. No I/O.
//!
//! A row says what one provider charges per GPU-hour for instances (nodes) of `gpu_count` GPUs:
//! one **offer** is (provider, GPU, GPUs per node, billing, region, currency). An allocation is
//! laid out in nodes of one shape ([`node_shape`]: the whole allocation in one node when the GPU's
//! board holds it, else full boards), and only rows of that shape price it, in whole nodes: a row
//! for 8-GPU nodes never prices a 4-GPU allocation, and sixteen 1-GPU instances are not two
//! 8-GPU nodes (tensor parallelism needs the GPUs of a node joined).
//!
//! Rows are keyed with their currency: the newest row per (provider, GPU, count, billing, region,
//! currency) is current, and an amount is only ever compared with amounts in the same currency
//! (there is no conversion rate to trust). [`allocation_price`] is the one price of an allocation
//! that every page shows — the sizing table, the brief page, the trial and the review — with its
//! billing always named.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use crate::{
    sizing::{self, OptionPrice, Sizing, WorkloadKind},
    validation::FieldError,
};

/// The header of a price sheet, in order.
pub const COLUMNS: [&str; 9] = [
    "provider",
    "gpu",
    "gpu_count",
    "billing",
    "rate_per_gpu_hour",
    "currency",
    "region",
    "valid_from",
    "source",
];
pub const BILLINGS: [&str; 4] = crate::figures::BILLINGS;
/// Rows one sheet may hold.
pub const MAX_ROWS: usize = 10_000;
/// Errors reported before reading stops.
const MAX_ERRORS: usize = 50;
use crate::figures::HOURS_PER_MONTH;

/// One checked row of a sheet.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PriceRow {
    /// Line in the file (the header is line 1).
    pub line: u32,
    pub provider: String,
    pub gpu: String,
    pub gpu_count: i32,
    pub billing: String,
    #[serde(with = "rust_decimal::serde::str")]
    pub rate_per_gpu_hour: Decimal,
    pub currency: String,
    pub region: String,
    pub valid_from: NaiveDate,
    pub source: String,
}

/// A stored row, with the sheet it came from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoredPrice {
    pub id: Uuid,
    pub sheet_id: Uuid,
    #[serde(flatten)]
    pub row: PriceRow,
}

/// `GET /api/v1/prices`: the current price rows, or every row.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PriceList {
    pub items: Vec<StoredPrice>,
}

/// Why a sheet was refused: every bad cell, by line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SheetErrors(pub Vec<FieldError>);

fn at(line: usize, column: Option<usize>, message: impl Into<String>) -> FieldError {
    match column {
        Some(i) => FieldError::new(format!("line {line}, column {} ({})", i + 1, COLUMNS[i]), message),
        None => FieldError::new(format!("line {line}"), message),
    }
}

/// A CSV sheet's reader (cells trimmed, rows of any length) and its header's names, read first; a
/// header that cannot be read is an error of line 1.
pub fn sheet_reader(text: &[u8]) -> Result<(::csv::Reader<&[u8]>, Vec<String>), SheetErrors> {
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(text);
    let header = match rdr.headers() {
        Ok(h) => h.iter().map(str::to_owned).collect(),
        Err(e) => {
            return Err(SheetErrors(vec![at(
                1,
                None,
                format!("could not read the header: {e}"),
            )]))
        }
    };
    Ok((rdr, header))
}

/// Parses and checks a whole sheet. All or nothing: any error and no row is returned.
pub fn parse_sheet(text: &[u8]) -> Result<Vec<PriceRow>, SheetErrors> {
    let (mut rdr, header) = sheet_reader(text)?;
    if header != COLUMNS {
        return Err(SheetErrors(vec![at(
            1,
            None,
            format!(
                "the header must be exactly {}{}",
                COLUMNS.join(","),
                super::detect::belongs_elsewhere(&header, super::detect::Import::Sheet)
            ),
        )]));
    }
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, record) in rdr.records().enumerate() {
        let line = i + 2;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                errors.push(at(line, None, format!("unreadable CSV: {e}")));
                break;
            }
        };
        if record.iter().all(str::is_empty) {
            continue;
        }
        if record.len() != COLUMNS.len() {
            errors.push(at(
                line,
                None,
                format!("expected {} fields, found {}", COLUMNS.len(), record.len()),
            ));
        } else {
            let cells: Vec<&str> = record.iter().collect();
            match check_row(line, &cells) {
                Ok(row) => rows.push(row),
                Err(mut e) => errors.append(&mut e),
            }
        }
        if rows.len() > MAX_ROWS {
            return Err(SheetErrors(vec![FieldError::new(
                "file",
                format!("more than {MAX_ROWS} rows; split the sheet"),
            )]));
        }
        if errors.len() >= MAX_ERRORS {
            errors.push(FieldError::new("file", format!("stopped after {MAX_ERRORS} errors")));
            break;
        }
    }
    if !errors.is_empty() {
        return Err(SheetErrors(errors));
    }
    if rows.is_empty() {
        return Err(SheetErrors(vec![FieldError::new("file", "the sheet has no rows")]));
    }
    Ok(rows)
}

/// One check per price sheet column, in column order, every error collected.
fn check_row(line: usize, cells: &[&str]) -> Result<PriceRow, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut fail = |col: usize, message: &str| errors.push(at(line, Some(col), message));
    let text = |s: &str| s.chars().all(|c| !c.is_control());
    let provider = cells[0].to_owned();
    if provider.is_empty() || provider.chars().count() > 200 || !text(&provider) {
        fail(0, "a provider name of 1 to 200 characters is required");
    }
    let gpu = match sizing::gpu_by_name(cells[1]) {
        Some(g) => g.model.clone(),
        None => {
            fail(1, "is not a GPU of the catalogue (its model name, e.g. H100 SXM)");
            String::new()
        }
    };
    let gpu_count = match cells[2].parse::<i32>() {
        Ok(n) if (1..=4096).contains(&n) => n,
        _ => {
            fail(2, "must be a whole number of GPUs per instance, 1 to 4096");
            0
        }
    };
    let billing = if let Some(word) = crate::figures::billing(cells[3]) {
        word.to_owned()
    } else {
        fail(3, "must be one of: on-demand, spot, reserved, serverless");
        String::new()
    };
    let rate = match plain_rate(cells[4]) {
        Some(d) => d,
        None => {
            fail(
                4,
                "must be a price above 0 written as a plain decimal such as 2.49 \
                 (no currency sign, exponent or separator, at most 6 decimal places)",
            );
            Decimal::ZERO
        }
    };
    let currency = cells[5].to_ascii_uppercase();
    if !crate::figures::is_currency(&currency) {
        fail(
            5,
            "must be the ISO 4217 code of a currency in circulation, such as USD or EUR",
        );
    }
    let region = cells[6].to_owned();
    if region.chars().count() > 200 || !text(&region) {
        fail(6, "must be at most 200 characters");
    }
    let valid_from = match NaiveDate::parse_from_str(cells[7], "%Y-%m-%d") {
        Ok(d) => d,
        Err(_) => {
            fail(7, "must be a date such as 2026-11-01");
            NaiveDate::MIN
        }
    };
    let source = cells[8].to_owned();
    if source.is_empty() || source.chars().count() > 500 || !text(&source) {
        fail(
            8,
            "say where the price comes from (a URL, a quote number): 1 to 500 characters",
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(PriceRow {
        line: line as u32,
        provider,
        gpu,
        gpu_count,
        billing,
        rate_per_gpu_hour: rate,
        currency,
        region,
        valid_from,
        source,
    })
}

/// A rate per GPU-hour: a plain decimal only (`1e3` or `1_000` parse as numbers but nobody writes
/// a price that way), above 0 (a rate of 0 would make every allocation on that offer free), at
/// most 1,000,000 with at most 6 decimal places.
fn plain_rate(cell: &str) -> Option<Decimal> {
    match cell.parse::<Decimal>() {
        Ok(d)
            if crate::figures::is_plain_decimal(cell)
                && d > Decimal::ZERO
                && d <= Decimal::from(1_000_000)
                && d.scale() <= 6 =>
        {
            Some(d.normalize())
        }
        _ => None,
    }
}

/// What an allocation of `count` GPUs costs on one offer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quote {
    /// The price row it comes from.
    pub price_id: Uuid,
    pub provider: String,
    pub billing: String,
    pub region: String,
    /// Instances of the offer's size rented, and the GPUs they hold (paid for, used or not).
    pub instances: u32,
    pub gpus_billed: u32,
    #[serde(with = "rust_decimal::serde::str")]
    pub rate_per_gpu_hour: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    pub per_hour: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    pub per_month: Decimal,
    pub currency: String,
    pub valid_from: NaiveDate,
    pub source: String,
}

/// GPUs per node of `count` × `gpu`: all of them when one board of the catalogue's size holds
/// them, else full boards (16 × L4 on 8-GPU boards: nodes of 8). A GPU the catalogue does not
/// know is taken as one node of `count`.
pub fn node_shape(gpu: &str, count: u32) -> u32 {
    let board = sizing::gpu_by_name(gpu).map_or(count, |g| g.gpus_per_node);
    count.min(board).max(1)
}

/// Whether `price` is a row of the node shape `count` × its GPU is laid out in.
fn prices_the_layout(price: &StoredPrice, count: u32) -> bool {
    u32::try_from(price.row.gpu_count).is_ok_and(|size| size == node_shape(&price.row.gpu, count))
}

/// The price of `count` GPUs on one offer.
pub fn quote(price: &StoredPrice, count: u32) -> Quote {
    let size = price.row.gpu_count.max(1) as u32;
    let instances = count.div_ceil(size);
    let gpus_billed = instances * size;
    let mut per_hour = price.row.rate_per_gpu_hour * Decimal::from(gpus_billed);
    // Exact, and written with at least cents: "10.00", not "10.0".
    if per_hour.scale() < 2 {
        per_hour.rescale(2);
    }
    Quote {
        price_id: price.id,
        provider: price.row.provider.clone(),
        billing: price.row.billing.clone(),
        region: price.row.region.clone(),
        instances,
        gpus_billed,
        rate_per_gpu_hour: price.row.rate_per_gpu_hour,
        per_hour,
        per_month: (per_hour * HOURS_PER_MONTH).round_dp(2),
        currency: price.row.currency.clone(),
        valid_from: price.row.valid_from,
        source: price.row.source.clone(),
    }
}

/// The cheapest current offer for `count` × `gpu` in `currency`, among rows of its node shape
/// (prices in other currencies are never compared with it: there is no conversion rate to
/// trust). Ties go to fewer GPUs billed, then to the
/// provider's name.
pub fn cheapest(current: &[StoredPrice], gpu: &str, count: u32, currency: &str) -> Option<Quote> {
    cheapest_where(current, gpu, count, currency, |_| true)
}

fn cheapest_where(
    current: &[StoredPrice],
    gpu: &str,
    count: u32,
    currency: &str,
    keep: impl Fn(&StoredPrice) -> bool,
) -> Option<Quote> {
    current
        .iter()
        .filter(|p| p.row.gpu == gpu && p.row.currency == currency && prices_the_layout(p, count) && keep(p))
        .map(|p| quote(p, count))
        .min_by(|a, b| {
            a.per_hour
                .cmp(&b.per_hour)
                .then_with(|| a.gpus_billed.cmp(&b.gpus_billed))
                .then_with(|| a.provider.cmp(&b.provider))
        })
}

/// What a spot price says beside a real-time brief's option (decision rule 6c).
pub const INTERRUPTIBLE: &str = "interruptible: not for real-time serving";

/// Puts each option's price (in `currency`) beside it: the cheapest current offer of the option's
/// node shape, its billing named. For a real-time brief spot rows come after the on-demand and
/// reserved ones: a spot price is shown only where nothing else prices the option, with
/// [`INTERRUPTIBLE`].
pub fn price_options(sizing: &mut Sizing, current: &[StoredPrice], currency: &str, workload: WorkloadKind) {
    let realtime = workload == WorkloadKind::RealtimeInference;
    for option in &mut sizing.options {
        let steady = cheapest_where(current, &option.gpu, option.count, currency, |p| {
            !realtime || p.row.billing != "spot"
        });
        let (quote, note) = match steady {
            Some(q) => (Some(q), None),
            None => (
                cheapest(current, &option.gpu, option.count, currency),
                realtime.then(|| INTERRUPTIBLE.to_owned()),
            ),
        };
        option.price = quote.map(|q| OptionPrice {
            per_hour: q.per_hour,
            per_month: q.per_month,
            provider: q.provider,
            currency: currency.to_owned(),
            price_id: q.price_id,
            gpus_billed: q.gpus_billed,
            gpus_per_node: q.gpus_billed / q.instances.max(1),
            nodes: q.instances,
            billing: q.billing,
            note,
        });
    }
}

/// Where an allocation's price comes from, most specific first.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum PriceSource {
    /// The trial's own `rate_per_gpu_hour`.
    Trial,
    /// A current price row of the trial's provider, GPU and billing.
    PriceRow { price_id: Uuid },
    /// What the ledger billed on average per GPU-hour.
    Ledger,
    /// The cheapest current row of the GPU from any provider, any billing (named).
    CheapestOffer { price_id: Uuid },
}

impl PriceSource {
    pub fn price_id(&self) -> Option<Uuid> {
        match self {
            PriceSource::PriceRow { price_id } | PriceSource::CheapestOffer { price_id } => Some(*price_id),
            PriceSource::Trial | PriceSource::Ledger => None,
        }
    }
}

/// What an allocation costs, with its billing and where the figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AllocationPrice {
    #[serde(with = "rust_decimal::serde::str")]
    pub per_gpu_hour: Decimal,
    /// GPUs paid for: whole instances of the offer's size.
    pub gpus_billed: u32,
    #[serde(with = "rust_decimal::serde::str")]
    pub per_hour: Decimal,
    /// 730 hours of it.
    #[serde(with = "rust_decimal::serde::str")]
    pub per_month: Decimal,
    /// `on-demand`, `spot`, `reserved`, `serverless`: always named.
    pub billing: String,
    /// Empty when the figure is the trial's own or the ledger's and the trial names no provider.
    pub provider: String,
    pub region: String,
    pub source: PriceSource,
    /// Where it comes from, in words ("Lambda's on-demand price of 2026-11-01 (lambda.ai), 8 GPUs
    /// billed").
    pub description: String,
}

impl AllocationPrice {
    /// "20.80 USD an hour (spot, Cloud A)": the figure and its billing, as every page shows it.
    pub fn per_hour_text(&self, currency: &str) -> String {
        let mut who = self.billing.clone();
        if !self.provider.is_empty() {
            who.push_str(&format!(", {}", self.provider));
        }
        format!(
            "{} an hour ({who})",
            crate::figures::rate_with_currency(self.per_hour, currency)
        )
    }
}

/// What is rented: a GPU and a count in the brief's currency, and — for a trial — its provider,
/// billing, region, own rate and what its ledger billed.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    pub gpu: &'a str,
    pub count: u32,
    pub currency: &'a str,
    pub provider: &'a str,
    pub billing: Option<&'a str>,
    pub region: Option<&'a str>,
    /// The trial's own rate per GPU-hour (already in `currency`).
    pub own_rate: Option<Decimal>,
    /// The ledger's average billed rate per GPU-hour.
    pub ledger_rate: Option<Decimal>,
}

impl<'a> Offer<'a> {
    /// An allocation no trial names yet (a sizing option).
    pub fn bare(gpu: &'a str, count: u32, currency: &'a str) -> Self {
        Offer {
            gpu,
            count,
            currency,
            provider: "",
            billing: None,
            region: None,
            own_rate: None,
            ledger_rate: None,
        }
    }

    fn region_matches(&self, p: &StoredPrice) -> bool {
        self.region
            .is_none_or(|r| r.trim().is_empty() || p.row.region.eq_ignore_ascii_case(r.trim()))
    }

    fn provider_matches(&self, p: &StoredPrice) -> bool {
        !self.provider.trim().is_empty() && p.row.provider.eq_ignore_ascii_case(self.provider.trim())
    }
}

fn whole(d: Decimal) -> Decimal {
    let mut d = d;
    if d.scale() < 2 {
        d.rescale(2);
    }
    d
}

fn priced(per_gpu_hour: Decimal, gpus_billed: u32) -> (Decimal, Decimal) {
    let per_hour = whole(per_gpu_hour * Decimal::from(gpus_billed));
    (per_hour, (per_hour * HOURS_PER_MONTH).round_dp(2))
}

/// "Lambda's on-demand price of 2026-11-01 (lambda.ai/pricing), 8 GPUs billed".
fn quote_description(q: &Quote, what: &str) -> String {
    let mut text = format!("{}'s {} {what} of {}", q.provider, q.billing, q.valid_from);
    if !q.source.is_empty() {
        text.push_str(&format!(" ({})", q.source));
    }
    text.push_str(&format!(", {} GPUs billed", q.gpus_billed));
    text
}

fn from_quote(q: Quote, source: PriceSource, what: &str) -> AllocationPrice {
    AllocationPrice {
        description: quote_description(&q, what),
        per_gpu_hour: q.rate_per_gpu_hour,
        gpus_billed: q.gpus_billed,
        per_hour: q.per_hour,
        per_month: q.per_month,
        billing: q.billing,
        provider: q.provider,
        region: q.region,
        source,
    }
}

/// The one price of an allocation, most specific first: the trial's own rate; a current row of
/// its provider, GPU and billing (region too when it names one); what its ledger billed on
/// average; the cheapest current row of its GPU from any provider (named), of its billing when one
/// is, a spot row only when nothing else prices it. Every
/// amount is in the offer's currency: a row in another currency never prices it.
pub fn allocation_price(current: &[StoredPrice], offer: &Offer<'_>) -> Option<AllocationPrice> {
    let billing = offer.billing.unwrap_or("on-demand");
    let own = |rate: Decimal, source: PriceSource, description: &str| {
        let (per_hour, per_month) = priced(rate, offer.count);
        AllocationPrice {
            per_gpu_hour: rate,
            gpus_billed: offer.count,
            per_hour,
            per_month,
            billing: billing.to_owned(),
            provider: offer.provider.trim().to_owned(),
            region: offer.region.unwrap_or_default().trim().to_owned(),
            source,
            description: description.to_owned(),
        }
    };
    if let Some(rate) = offer.own_rate {
        return Some(own(rate, PriceSource::Trial, "the trial's own rate"));
    }
    if let Some(trial_billing) = offer.billing {
        let row = current
            .iter()
            .filter(|p| {
                offer.provider_matches(p)
                    && p.row.gpu == offer.gpu
                    && prices_the_layout(p, offer.count)
                    && p.row.billing == trial_billing
                    && p.row.currency == offer.currency
                    && offer.region_matches(p)
            })
            .map(|p| quote(p, offer.count))
            .min_by(|a, b| a.per_hour.cmp(&b.per_hour));
        if let Some(q) = row {
            let id = q.price_id;
            return Some(from_quote(q, PriceSource::PriceRow { price_id: id }, "price"));
        }
        if let Some(rate) = offer.ledger_rate {
            return Some(own(rate, PriceSource::Ledger, "the ledger's average billed rate"));
        }
    }
    // Any provider: the trial's billing first, then any but spot (an interruptible price never
    // stands for a trial billed otherwise while another row prices it), then spot.
    let of_billing = |keep: &dyn Fn(&str) -> bool| {
        cheapest_where(current, offer.gpu, offer.count, offer.currency, |p| {
            keep(&p.row.billing)
        })
    };
    of_billing(&|b| b == billing)
        .or_else(|| of_billing(&|b| b != "spot"))
        .or_else(|| cheapest(current, offer.gpu, offer.count, offer.currency))
        .map(|q| {
            let id = q.price_id;
            from_quote(
                q,
                PriceSource::CheapestOffer { price_id: id },
                "price, the cheapest current offer",
            )
        })
}

/// The reserved and on-demand prices of the offer a trial is priced on (same provider, GPU, GPUs
/// per node, region and currency), for the reservation break-even and the reservation itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReservedOffer {
    /// The current `reserved` row of the offer, as a quote for the allocation.
    pub reserved: Option<Quote>,
    /// The on-demand rate per GPU-hour of the same offer: its row, else the trial's own rate when
    /// the trial is billed on demand.
    #[serde(with = "rust_decimal::serde::str_option")]
    pub on_demand_rate: Option<Decimal>,
    pub on_demand_price_id: Option<Uuid>,
}

impl ReservedOffer {
    /// Reserved rate ÷ on-demand rate: the busy share below which paying by the hour is cheaper.
    pub fn break_even(&self) -> Option<Decimal> {
        let reserved = self.reserved.as_ref()?.rate_per_gpu_hour;
        let on_demand = self.on_demand_rate.filter(|r| *r > Decimal::ZERO)?;
        Some((reserved / on_demand).round_dp(4))
    }
}

/// The reserved and on-demand rows of the offer `price` came from (a row of the trial's provider),
/// else of the trial's provider, GPU, region and currency in the allocation's node shape.
pub fn reserved_offer(current: &[StoredPrice], offer: &Offer<'_>, price: Option<&AllocationPrice>) -> ReservedOffer {
    let node = price
        .and_then(|p| p.source.price_id())
        .and_then(|id| current.iter().find(|p| p.id == id))
        .filter(|p| offer.provider_matches(p));
    let same = |p: &&StoredPrice, billing: &str| {
        p.row.billing == billing
            && p.row.gpu == offer.gpu
            && p.row.currency == offer.currency
            && match node {
                Some(n) => {
                    p.row.provider == n.row.provider
                        && p.row.gpu_count == n.row.gpu_count
                        && p.row.region.eq_ignore_ascii_case(&n.row.region)
                }
                None => offer.provider_matches(p) && offer.region_matches(p),
            }
    };
    // Without a row to match, rows of the allocation's node shape only (another shape is another
    // offer); the cheapest of them.
    let pick = |billing: &str, with: &dyn Fn(&StoredPrice) -> bool| {
        current
            .iter()
            .filter(|p| same(p, billing) && (node.is_some() || prices_the_layout(p, offer.count)) && with(p))
            .min_by(|a, b| a.row.rate_per_gpu_hour.cmp(&b.row.rate_per_gpu_hour))
    };
    let reserved_row = pick("reserved", &|_| true);
    // The on-demand row of the reserved row's own offer (its provider, node shape and region):
    // two regions' cheapest rows are two offers, and their ratio no break-even.
    let on_demand_row = match reserved_row.filter(|_| node.is_none()) {
        Some(r) => pick("on-demand", &|p| {
            p.row.provider.eq_ignore_ascii_case(&r.row.provider)
                && p.row.gpu_count == r.row.gpu_count
                && p.row.region.eq_ignore_ascii_case(&r.row.region)
        }),
        None => pick("on-demand", &|_| true),
    };
    let (on_demand_rate, on_demand_price_id) = match on_demand_row {
        Some(p) => (Some(p.row.rate_per_gpu_hour), Some(p.id)),
        None if offer.billing == Some("on-demand") => (offer.own_rate, None),
        None => (None, None),
    };
    ReservedOffer {
        reserved: reserved_row.map(|p| quote(p, offer.count)),
        on_demand_rate,
        on_demand_price_id,
    }
}

/// Current rows of `gpu` in other currencies than `currency`: listed beside the prices, never
/// used for them.
pub fn other_currency_rows<'a>(current: &'a [StoredPrice], gpu: &str, currency: &str) -> Vec<&'a StoredPrice> {
    let mut rows: Vec<&StoredPrice> = current
        .iter()
        .filter(|p| p.row.gpu == gpu && p.row.currency != currency)
        .collect();
    rows.sort_by(|a, b| {
        (&a.row.currency, &a.row.provider, a.row.rate_per_gpu_hour).cmp(&(
            &b.row.currency,
            &b.row.provider,
            b.row.rate_per_gpu_hour,
        ))
    });
    rows
}

/// Orders fitting options by their price per hour (priced ones first, cheapest first, a real-time
/// brief's interruptible-only prices after the others), keeping the engine's order among unpriced ones; options that do not fit stay after those that do.
pub fn order_by_price(sizing: &mut Sizing) {
    sizing.options.sort_by(|a, b| {
        b.fits.cmp(&a.fits).then_with(|| match (&a.price, &b.price) {
            // Interruptible prices of a real-time brief after every other price.
            (Some(x), Some(y)) => (x.note.is_some(), x.per_hour).cmp(&(y.note.is_some(), y.per_hour)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source\n";

    fn stored(line: u32, provider: &str, gpu: &str, count: i32, rate: &str, currency: &str) -> StoredPrice {
        StoredPrice {
            id: Uuid::from_u128(u128::from(line)),
            sheet_id: Uuid::nil(),
            row: PriceRow {
                line,
                provider: provider.into(),
                gpu: gpu.into(),
                gpu_count: count,
                billing: "on-demand".into(),
                rate_per_gpu_hour: rate.parse().unwrap(),
                currency: currency.into(),
                region: String::new(),
                valid_from: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
                source: "quote".into(),
            },
        }
    }

    #[test]
    fn a_sheet_is_read_with_catalogue_names() {
        let rows = parse_sheet(
            format!("{HEADER}Cloud A,h100 sxm,8,on-demand,2.99,usd,us-east,2026-11-01,https://example.com/pricing\n")
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].gpu, "H100 SXM");
        assert_eq!(rows[0].currency, "USD");
        assert_eq!(rows[0].rate_per_gpu_hour, "2.99".parse::<Decimal>().unwrap());
        assert_eq!(rows[0].line, 2);
    }

    #[test]
    fn a_sheet_takes_the_billing_words_the_approval_form_takes() {
        let rows = parse_sheet(
            format!(
                "{HEADER}Cloud A,H100 SXM,8,On Demand,2.99,USD,,2026-11-01,q\n\
                 Cloud A,H100 SXM,8,SPOT,1.99,USD,,2026-11-01,q\n"
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            (rows[0].billing.as_str(), rows[1].billing.as_str()),
            ("on-demand", "spot")
        );
    }

    #[test]
    fn one_bad_row_refuses_the_sheet_naming_every_bad_cell() {
        let errors = parse_sheet(
            format!(
                "{HEADER}Cloud A,H100 SXM,8,on-demand,2.99,USD,,2026-11-01,quote 17\n\
                 Cloud B,H9000,0,monthly,$2.49,dollars,,11/01/2026,\n"
            )
            .as_bytes(),
        )
        .unwrap_err()
        .0;
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "line 3, column 2 (gpu)",
                "line 3, column 3 (gpu_count)",
                "line 3, column 4 (billing)",
                "line 3, column 5 (rate_per_gpu_hour)",
                "line 3, column 6 (currency)",
                "line 3, column 8 (valid_from)",
                "line 3, column 9 (source)",
            ]
        );
        assert!(parse_sheet(b"provider,gpu\nA,B\n").is_err(), "a wrong header");
        assert!(parse_sheet(HEADER.as_bytes()).is_err(), "no rows");
    }

    #[test]
    fn a_rate_is_a_plain_decimal_above_zero_in_a_currency_in_circulation() {
        let row = |rate: &str, currency: &str| {
            parse_sheet(
                format!("{HEADER}Cloud A,H100 SXM,8,on-demand,{rate},{currency},,2026-11-01,quote\n").as_bytes(),
            )
        };
        assert!(row("2.49", "USD").is_ok());
        assert!(row("3", "eur").is_ok());
        assert!(row("0.000001", "JPY").is_ok());
        for rate in [
            "0",
            "0.00",
            "1e3",
            "1E3",
            "2.5e-1",
            "1_000",
            "+2.49",
            "-1",
            ".5",
            "5.",
            "\"1,000.00\"",
            "0x10",
        ] {
            let errors = row(rate, "USD").unwrap_err().0;
            assert_eq!(errors.len(), 1, "{rate}: {errors:?}");
            assert_eq!(errors[0].field, "line 2, column 5 (rate_per_gpu_hour)", "{rate}");
        }
        for currency in ["QQQ", "XXX", "XTS", "XAU", "US", "USDT", "BTC"] {
            let errors = row("2.49", currency).unwrap_err().0;
            assert_eq!(errors[0].field, "line 2, column 6 (currency)", "{currency}");
        }
    }

    #[test]
    fn an_allocation_pays_for_whole_instances() {
        // 2 GPUs on 8-GPU nodes at 2.00 pay for 8 GPUs: 16.00 an hour, 11,680.00 a month.
        let q = quote(&stored(2, "A", "H100 SXM", 8, "2.00", "USD"), 2);
        assert_eq!((q.instances, q.gpus_billed), (1, 8));
        assert_eq!(q.per_hour, Decimal::from(16));
        assert_eq!(q.per_month, Decimal::from(11_680));
        // 12 GPUs on 8-GPU nodes: two nodes, 16 GPUs.
        assert_eq!(quote(&stored(2, "A", "H100 SXM", 8, "2.00", "USD"), 12).gpus_billed, 16);
    }

    #[test]
    fn the_cheapest_offer_of_the_layouts_node_shape_in_the_briefs_currency() {
        let prices = [
            stored(2, "Nodes only", "H100 SXM", 8, "1.90", "USD"),
            stored(3, "By the GPU", "H100 SXM", 1, "1.00", "USD"),
            stored(4, "Pairs", "H100 SXM", 2, "2.70", "USD"),
            stored(5, "Cheap in euros", "H100 SXM", 2, "1.00", "EUR"),
            stored(6, "Other GPU", "H200 SXM", 2, "0.10", "USD"),
            stored(7, "Singles", "L4", 1, "0.50", "USD"),
        ];
        // 2 GPUs run tensor-parallel in one 2-GPU node: 2 × 2.70 = 5.40 an hour. Two 1-GPU
        // instances (2.00) are not that layout, and an 8-GPU node is another offer.
        let q = cheapest(&prices, "H100 SXM", 2, "USD").unwrap();
        assert_eq!((q.provider.as_str(), q.per_hour), ("Pairs", Decimal::new(540, 2)));
        // 8 GPUs: the 8-GPU node, 8 × 1.90 = 15.20; 16 GPUs: two of those nodes, 30.40.
        assert_eq!(
            cheapest(&prices, "H100 SXM", 8, "USD").unwrap().per_hour,
            Decimal::new(1520, 2)
        );
        let two_nodes = cheapest(&prices, "H100 SXM", 16, "USD").unwrap();
        assert_eq!((two_nodes.instances, two_nodes.per_hour), (2, Decimal::new(3040, 2)));
        // No 4-GPU row: an 8-GPU node never prices a 4-GPU allocation.
        assert!(cheapest(&prices, "H100 SXM", 4, "USD").is_none());
        // 16 × L4 on 8-GPU boards: sixteen 1-GPU instances are not two 8-GPU nodes.
        assert!(cheapest(&prices, "L4", 16, "USD").is_none());
        assert_eq!(cheapest(&prices, "L4", 1, "USD").unwrap().per_hour, Decimal::new(50, 2));
        assert_eq!(
            cheapest(&prices, "H100 SXM", 2, "EUR").unwrap().provider,
            "Cheap in euros"
        );
    }

    fn option(gpu: &str, count: u32) -> crate::sizing::SizingOption {
        crate::sizing::SizingOption {
            gpu: gpu.into(),
            count,
            fits: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_real_time_briefs_option_shows_spot_only_when_nothing_else_prices_it() {
        let mut spot = stored(2, "Spot cloud", "H100 SXM", 8, "1.00", "USD");
        spot.row.billing = "spot".into();
        let on_demand = stored(3, "Steady cloud", "H100 SXM", 8, "2.00", "USD");
        let mut sizing = crate::sizing::Sizing {
            options: vec![option("H100 SXM", 8)],
            ..Default::default()
        };
        price_options(
            &mut sizing,
            &[spot.clone(), on_demand],
            "USD",
            WorkloadKind::RealtimeInference,
        );
        let p = sizing.options[0].price.clone().unwrap();
        assert_eq!(
            (p.billing.as_str(), p.per_hour, p.note),
            ("on-demand", Decimal::new(1600, 2), None)
        );
        // A batch brief takes the cheapest, spot included.
        price_options(&mut sizing, &[spot.clone()], "USD", WorkloadKind::BatchInference);
        let p = sizing.options[0].price.clone().unwrap();
        assert_eq!((p.billing.as_str(), p.note), ("spot", None));
        // Spot alone for a real-time brief: shown, and said to be interruptible.
        price_options(&mut sizing, &[spot], "USD", WorkloadKind::RealtimeInference);
        let p = sizing.options[0].price.clone().unwrap();
        assert_eq!((p.gpus_per_node, p.nodes), (8, 1));
        assert_eq!(p.note.as_deref(), Some(INTERRUPTIBLE));
    }

    fn with(mut p: StoredPrice, billing: &str, region: &str) -> StoredPrice {
        p.row.billing = billing.into();
        p.row.region = region.into();
        p
    }

    fn trial_offer<'a>(provider: &'a str, billing: &'a str, region: Option<&'a str>) -> Offer<'a> {
        Offer {
            provider,
            billing: Some(billing),
            region,
            ..Offer::bare("H100 SXM", 8, "USD")
        }
    }

    #[test]
    fn a_trial_billed_on_demand_is_not_priced_from_a_spot_row_of_another_provider() {
        let current = [
            with(stored(1, "A", "H100 SXM", 8, "3.00", "USD"), "on-demand", ""),
            with(stored(2, "B", "H100 SXM", 8, "1.20", "USD"), "spot", ""),
        ];
        // No provider named: the cheapest current offer of the trial's billing (it was B's spot
        // row, 9.60 an hour, where the sizing table said 24.00).
        let p = allocation_price(&current, &trial_offer("", "on-demand", None)).unwrap();
        assert_eq!(
            (p.per_hour, p.billing.as_str()),
            ("24.00".parse().unwrap(), "on-demand")
        );
        // Only spot prices it: then spot, named.
        let p = allocation_price(&current[1..], &trial_offer("", "on-demand", None)).unwrap();
        assert_eq!(p.billing, "spot");
        // A trial billed on spot takes the spot row.
        let p = allocation_price(&current, &trial_offer("", "spot", None)).unwrap();
        assert_eq!(p.billing, "spot");
    }

    #[test]
    fn the_break_even_compares_the_rows_of_one_offer() {
        let current = [
            with(stored(1, "X", "H100 SXM", 8, "2.00", "USD"), "reserved", "us-east"),
            with(stored(2, "X", "H100 SXM", 8, "3.00", "USD"), "on-demand", "us-east"),
            with(stored(3, "X", "H100 SXM", 8, "1.80", "USD"), "reserved", "eu"),
            with(stored(4, "X", "H100 SXM", 8, "3.50", "USD"), "on-demand", "eu"),
        ];
        // A trial of X naming no region, priced by its own rate: the cheapest reserved row (eu,
        // 1.80) against eu's on-demand 3.50, not us-east's 3.00 (0.6000, two offers' ratio).
        let mut offer = trial_offer("X", "on-demand", None);
        offer.own_rate = Some("3.10".parse().unwrap());
        let r = reserved_offer(&current, &offer, None);
        assert_eq!(r.on_demand_price_id, Some(current[3].id));
        assert_eq!(r.break_even(), Some("0.5143".parse().unwrap()));
        // In us-east: us-east's pair.
        offer.region = Some("us-east");
        assert_eq!(
            reserved_offer(&current, &offer, None).break_even(),
            Some("0.6667".parse().unwrap())
        );
    }
}
