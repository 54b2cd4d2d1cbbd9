//! Price sheets: the CSV a person imports, its rows checked one by one (all or nothing), and the
//! cheapest current offer for an allocation. No I/O.
//!
//! A row says what one provider charges per GPU-hour for instances of `gpu_count` GPUs. An
//! allocation of N GPUs rents ⌈N ÷ gpu_count⌉ such instances, so it pays for that many times
//! `gpu_count` GPUs (a 2-GPU allocation on 8-GPU nodes pays for 8).

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Serialize;
use uuid::Uuid;

use crate::{
    sizing::{self, OptionPrice, Sizing},
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
pub const BILLINGS: [&str; 4] = ["on-demand", "spot", "reserved", "serverless"];
/// Rows one sheet may hold.
pub const MAX_ROWS: usize = 10_000;
/// Errors reported before reading stops.
const MAX_ERRORS: usize = 50;
use crate::money::HOURS_PER_MONTH;

/// One checked row of a sheet.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredPrice {
    pub id: Uuid,
    pub sheet_id: Uuid,
    #[serde(flatten)]
    pub row: PriceRow,
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

/// Parses and checks a whole sheet. All or nothing: any error and no row is returned.
pub fn parse_sheet(text: &[u8]) -> Result<Vec<PriceRow>, SheetErrors> {
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(text);
    let header: Vec<String> = match rdr.headers() {
        Ok(h) => h.iter().map(str::to_owned).collect(),
        Err(e) => {
            return Err(SheetErrors(vec![at(
                1,
                None,
                format!("could not read the header: {e}"),
            )]))
        }
    };
    if header != COLUMNS {
        return Err(SheetErrors(vec![at(
            1,
            None,
            format!("the header must be exactly {}", COLUMNS.join(",")),
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
    let billing = if BILLINGS.contains(&cells[3]) {
        cells[3].to_owned()
    } else {
        fail(3, "must be one of: on-demand, spot, reserved, serverless");
        String::new()
    };
    // A plain decimal only: `1e3` or `1_000` parse as numbers but nobody writes a price that way,
    // and a rate of 0 would make every allocation on that offer free.
    let rate = match cells[4].parse::<Decimal>() {
        Ok(d)
            if crate::money::is_plain_decimal(cells[4])
                && d > Decimal::ZERO
                && d <= Decimal::from(1_000_000)
                && d.scale() <= 6 =>
        {
            d.normalize()
        }
        _ => {
            fail(
                4,
                "must be a price above 0 written as a plain decimal such as 2.49 \
                 (no currency sign, exponent or separator, at most 6 decimal places)",
            );
            Decimal::ZERO
        }
    };
    let currency = cells[5].to_ascii_uppercase();
    if !crate::money::is_currency(&currency) {
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

/// The cheapest current offer for `count` × `gpu` in `currency` (prices in other currencies are
/// never compared with it: there is no conversion rate to trust). Ties go to fewer GPUs billed,
/// then to the provider's name.
pub fn cheapest(current: &[StoredPrice], gpu: &str, count: u32, currency: &str) -> Option<Quote> {
    current
        .iter()
        .filter(|p| p.row.gpu == gpu && p.row.currency == currency)
        .map(|p| quote(p, count))
        .min_by(|a, b| {
            a.per_hour
                .cmp(&b.per_hour)
                .then_with(|| a.gpus_billed.cmp(&b.gpus_billed))
                .then_with(|| a.provider.cmp(&b.provider))
        })
}

/// Puts each option's cheapest current price (in `currency`) beside it.
pub fn price_options(sizing: &mut Sizing, current: &[StoredPrice], currency: &str) {
    for option in &mut sizing.options {
        option.price = cheapest(current, &option.gpu, option.count, currency).map(|q| OptionPrice {
            per_hour: q.per_hour,
            per_month: q.per_month,
            provider: q.provider,
            currency: q.currency,
            price_id: q.price_id,
            gpus_billed: q.gpus_billed,
        });
    }
}

/// Orders fitting options by their price per hour (priced ones first, cheapest first), keeping the
/// engine's order among unpriced ones; options that do not fit stay after those that do.
pub fn order_by_price(sizing: &mut Sizing) {
    sizing.options.sort_by(|a, b| {
        b.fits.cmp(&a.fits).then_with(|| match (&a.price, &b.price) {
            (Some(x), Some(y)) => x.per_hour.cmp(&y.per_hour),
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
    fn the_cheapest_offer_in_the_briefs_currency() {
        let prices = [
            stored(2, "Nodes only", "H100 SXM", 8, "1.90", "USD"),
            stored(3, "By the GPU", "H100 SXM", 1, "2.50", "USD"),
            stored(4, "Cheap in euros", "H100 SXM", 1, "1.00", "EUR"),
            stored(5, "Other GPU", "H200 SXM", 1, "0.10", "USD"),
        ];
        // 2 GPUs: a node of 8 at 1.90 is 15.20 an hour; two single GPUs at 2.50 are 5.00.
        let q = cheapest(&prices, "H100 SXM", 2, "USD").unwrap();
        assert_eq!(q.provider, "By the GPU");
        assert_eq!(q.per_hour, Decimal::from(5));
        // 8 GPUs: the node (15.20) beats eight singles (20.00).
        assert_eq!(cheapest(&prices, "H100 SXM", 8, "USD").unwrap().provider, "Nodes only");
        assert_eq!(
            cheapest(&prices, "H100 SXM", 2, "EUR").unwrap().provider,
            "Cheap in euros"
        );
        assert!(cheapest(&prices, "L4", 1, "USD").is_none());
    }
}
