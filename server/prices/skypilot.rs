//! SkyPilot offer catalogues read as price rows. No I/O.
//!
//! SkyPilot keeps one `vms.csv` per cloud (github.com/skypilot-org/skypilot-catalog, schema v5 and
//! later): `InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price,
//! SpotPrice, Region, AvailabilityZone`, in any order, prices per instance-hour in USD. Each row
//! whose accelerator the GPU catalogue knows (through `data/skypilot_accelerators.csv`) becomes an
//! `on-demand` row from `Price` and a `spot` row from `SpotPrice`, each per GPU-hour (the instance
//! price ÷ `AcceleratorCount`). An offer is (GPU, GPUs per instance, region, billing): the zones of
//! a region and several instance types of one offer keep the lowest price, and `source` names the
//! instance type of the row kept (`skypilot:p5.48xlarge`).
//!
//! Rows that are not offers of a known GPU — CPU-only instances, accelerators the table does not
//! name (listed, never guessed), fractions of a GPU, rows without any price — are skipped and
//! listed. Malformed rows refuse the whole file, every bad cell named by line and column, like a
//! price sheet.

use std::{collections::HashMap, sync::LazyLock};

use chrono::NaiveDate;
use rust_decimal::{prelude::ToPrimitive, Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::model::{PriceRow, SheetErrors, MAX_ROWS};
use crate::{sizing, validation::FieldError};

const TABLE_CSV: &str = include_str!("../../data/skypilot_accelerators.csv");

/// Columns a catalogue must have (found by name; the others are read when present).
pub const REQUIRED_COLUMNS: [&str; 5] = ["InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region"];
/// SkyPilot's catalogues price in US dollars.
pub const CURRENCY: &str = "USD";
/// Per-GPU rates keep this many decimal places (the price table's precision): an 8-GPU spot price
/// of 5.2117 is 0.651463 per GPU-hour.
pub const RATE_DECIMALS: u32 = 6;
/// Errors reported before reading stops.
const MAX_ERRORS: usize = 50;
/// Instance types and lines quoted per skipped group.
pub const MAX_EXAMPLES: usize = 10;

/// One row of `data/skypilot_accelerators.csv`: a SkyPilot accelerator name (and, optionally, a
/// piece of the instance type that tells two form factors apart) and the GPU catalogue's model.
#[derive(Debug, Clone, Deserialize)]
pub struct AcceleratorName {
    pub accelerator: String,
    /// Matched case-insensitively inside `InstanceType`; rows with one are tried first.
    pub instance_type_contains: String,
    pub gpu: String,
    pub source: String,
}

/// The table, parsed once. A malformed table panics at first use; a unit test parses it.
pub fn table() -> &'static [AcceleratorName] {
    static TABLE: LazyLock<Vec<AcceleratorName>> = LazyLock::new(|| {
        ::csv::Reader::from_reader(TABLE_CSV.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .expect("data/skypilot_accelerators.csv is malformed")
    });
    &TABLE
}

/// The GPU catalogue's model for a SkyPilot accelerator on an instance type, or `None` when the
/// table does not name the accelerator.
pub fn gpu_for(accelerator: &str, instance_type: &str) -> Option<&'static str> {
    let instance = instance_type.to_ascii_lowercase();
    let named = || {
        table()
            .iter()
            .filter(|a| a.accelerator.eq_ignore_ascii_case(accelerator.trim()))
    };
    named()
        .find(|a| {
            !a.instance_type_contains.is_empty() && instance.contains(&a.instance_type_contains.to_ascii_lowercase())
        })
        .or_else(|| named().find(|a| a.instance_type_contains.is_empty()))
        .map(|a| a.gpu.as_str())
}

/// Why catalogue rows were left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// No accelerator: a CPU-only instance.
    CpuOnly,
    /// An accelerator `data/skypilot_accelerators.csv` does not name.
    UnknownAccelerator,
    /// Less than one GPU per instance (a shared GPU); a price row counts whole GPUs.
    FractionOfAGpu,
    /// Neither `Price` nor `SpotPrice` (or both zero).
    NoPrice,
}

impl SkipReason {
    pub fn says(&self) -> &'static str {
        match self {
            SkipReason::CpuOnly => "no GPU (a CPU-only instance)",
            SkipReason::UnknownAccelerator => "an accelerator the GPU catalogue does not name",
            SkipReason::FractionOfAGpu => "a fraction of a GPU per instance",
            SkipReason::NoPrice => "neither an on-demand nor a spot price",
        }
    }
}

/// Skipped rows of one reason and accelerator name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub reason: SkipReason,
    /// The catalogue's `AcceleratorName` ("" for CPU-only rows).
    pub accelerator: String,
    pub rows: u64,
    /// The first few instance types and lines (line 1 is the header).
    pub instance_types: Vec<String>,
    pub lines: Vec<u32>,
}

/// A catalogue read: the price rows to store and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogueImport {
    pub rows: Vec<PriceRow>,
    pub skipped: Vec<Skipped>,
    /// Catalogue rows read (without the header).
    pub rows_read: u64,
}

/// What `POST /api/v1/prices` answers: the sheet and its rows; a SkyPilot catalogue adds how many
/// rows it read and the rows it skipped (absent for a sheet).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PriceImport<'a> {
    pub sheet_id: Uuid,
    /// How many rows were stored.
    pub rows: usize,
    pub prices: &'a [PriceRow],
    /// A catalogue: the rows read (without the header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalogue_rows: Option<u64>,
    /// A catalogue: the rows left out, by reason and accelerator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Vec<SkippedRows<'a>>>,
}

/// Catalogue rows left out for one reason and accelerator name.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SkippedRows<'a> {
    pub reason: SkipReason,
    /// The reason in words.
    pub says: &'static str,
    /// The catalogue's `AcceleratorName` ("" for CPU-only rows).
    pub accelerator: &'a str,
    pub rows: u64,
    /// The first few instance types.
    pub instance_types: &'a [String],
    /// The first few lines (line 1 is the header).
    pub lines: &'a [u32],
}

impl<'a> PriceImport<'a> {
    /// The answer to an import of `import` as sheet `sheet_id`; `catalogue`: it was a SkyPilot
    /// catalogue.
    pub fn of(sheet_id: Uuid, import: &'a CatalogueImport, catalogue: bool) -> Self {
        Self {
            sheet_id,
            rows: import.rows.len(),
            prices: &import.rows,
            catalogue_rows: catalogue.then_some(import.rows_read),
            skipped: catalogue.then(|| {
                import
                    .skipped
                    .iter()
                    .map(|s| SkippedRows {
                        reason: s.reason,
                        says: s.reason.says(),
                        accelerator: &s.accelerator,
                        rows: s.rows,
                        instance_types: &s.instance_types,
                        lines: &s.lines,
                    })
                    .collect()
            }),
        }
    }
}

fn cell_error(line: usize, column: usize, name: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(format!("line {line}, column {} ({name})", column + 1), message)
}

/// A price cell: empty is `None`; a decimal (SkyPilot writes `123.19496`, pandas may write
/// `1e-05`) that is not negative.
fn price(raw: &str) -> Result<Option<Decimal>, &'static str> {
    if raw.is_empty() {
        return Ok(None);
    }
    let d = Decimal::from_str_exact(raw)
        .or_else(|_| Decimal::from_scientific(raw))
        .map_err(|_| "must be a decimal price per instance-hour such as 98.32")?;
    if d.is_sign_negative() && !d.is_zero() {
        return Err("must not be negative");
    }
    if d > Decimal::from(1_000_000_000) {
        return Err("is too large for a price per instance-hour");
    }
    Ok(Some(d))
}

/// Reads a whole catalogue for `provider`, each row valid from `valid_from`. All or nothing for
/// malformed rows; rows that are not offers of a known GPU are skipped and listed.
// Long, and reads better whole: one pass over the catalogue's rows that keeps the cheapest row per
// offer and every error by line.
pub fn parse_catalogue(text: &[u8], provider: &str, valid_from: NaiveDate) -> Result<CatalogueImport, SheetErrors> {
    let provider = provider.trim();
    if provider.is_empty() || provider.chars().count() > 200 || provider.chars().any(char::is_control) {
        return Err(SheetErrors(vec![FieldError::new(
            "provider",
            "name the provider whose catalogue this is (1 to 200 characters), e.g. provider=AWS",
        )]));
    }
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(text);
    let header: Vec<String> = match rdr.headers() {
        Ok(h) => h.iter().map(str::to_owned).collect(),
        Err(e) => {
            return Err(SheetErrors(vec![FieldError::new(
                "line 1",
                format!("could not read the header: {e}"),
            )]))
        }
    };
    let find = |name: &str| header.iter().position(|h| h == name);
    let missing: Vec<&str> = REQUIRED_COLUMNS.iter().copied().filter(|c| find(c).is_none()).collect();
    if !missing.is_empty() {
        return Err(SheetErrors(vec![FieldError::new(
            "line 1",
            format!(
                "a SkyPilot vms.csv names the columns {}; this header lacks {}",
                REQUIRED_COLUMNS.join(", "),
                missing.join(", ")
            ),
        )]));
    }
    let column = |name: &str| find(name).expect("checked above");
    let (c_instance, c_name, c_count, c_price, c_region) = (
        column("InstanceType"),
        column("AcceleratorName"),
        column("AcceleratorCount"),
        column("Price"),
        column("Region"),
    );
    let c_spot = find("SpotPrice");

    // Offer → index in `rows`; the lowest price of an offer is kept.
    let mut offers: HashMap<(String, i32, String, &'static str), usize> = HashMap::new();
    let mut rows: Vec<PriceRow> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let mut errors = Vec::new();
    let mut rows_read = 0u64;
    let mut skip = |reason: SkipReason, accelerator: &str, instance: &str, line: usize| {
        let group = match skipped
            .iter_mut()
            .position(|s| s.reason == reason && s.accelerator == accelerator)
        {
            Some(i) => &mut skipped[i],
            None => {
                skipped.push(Skipped {
                    reason,
                    accelerator: accelerator.to_owned(),
                    rows: 0,
                    instance_types: Vec::new(),
                    lines: Vec::new(),
                });
                skipped.last_mut().expect("just pushed")
            }
        };
        group.rows += 1;
        if group.lines.len() < MAX_EXAMPLES {
            group.lines.push(line as u32);
        }
        if group.instance_types.len() < MAX_EXAMPLES && !group.instance_types.iter().any(|t| t == instance) {
            group.instance_types.push(instance.to_owned());
        }
    };
    for (i, record) in rdr.records().enumerate() {
        let line = i + 2;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                errors.push(FieldError::new(format!("line {line}"), format!("unreadable CSV: {e}")));
                break;
            }
        };
        if record.iter().all(str::is_empty) {
            continue;
        }
        rows_read += 1;
        if record.len() != header.len() {
            errors.push(FieldError::new(
                format!("line {line}"),
                format!("expected {} fields, found {}", header.len(), record.len()),
            ));
        } else {
            let cell = |c: usize| record.get(c).unwrap_or("");
            let instance = cell(c_instance);
            let accelerator = cell(c_name);
            let text_ok = |s: &str| s.chars().count() <= 200 && !s.chars().any(char::is_control);
            let mut row_errors = Vec::new();
            if instance.is_empty() || !text_ok(instance) {
                row_errors.push(cell_error(
                    line,
                    c_instance,
                    "InstanceType",
                    "an instance type of 1 to 200 characters is required",
                ));
            }
            if !text_ok(cell(c_region)) {
                row_errors.push(cell_error(line, c_region, "Region", "must be at most 200 characters"));
            }
            if accelerator.is_empty() {
                if row_errors.is_empty() {
                    skip(SkipReason::CpuOnly, "", instance, line);
                }
                errors.extend(row_errors);
                continue;
            }
            let Some(gpu) = gpu_for(accelerator, instance) else {
                if row_errors.is_empty() {
                    skip(SkipReason::UnknownAccelerator, accelerator, instance, line);
                }
                errors.extend(row_errors);
                continue;
            };
            let count = match Decimal::from_str_exact(cell(c_count)) {
                Ok(n) if n > Decimal::ZERO && n <= Decimal::from(4096) => Some(n),
                _ => {
                    row_errors.push(cell_error(
                        line,
                        c_count,
                        "AcceleratorCount",
                        format!(
                            "must be the number of {accelerator} per instance, above 0 and at most 4096 (got {:?})",
                            cell(c_count)
                        ),
                    ));
                    None
                }
            };
            let on_demand = price(cell(c_price)).unwrap_or_else(|m| {
                row_errors.push(cell_error(line, c_price, "Price", m));
                None
            });
            let spot = c_spot.and_then(|c| {
                price(cell(c)).unwrap_or_else(|m| {
                    row_errors.push(cell_error(line, c, "SpotPrice", m));
                    None
                })
            });
            if !row_errors.is_empty() {
                errors.extend(row_errors);
            } else if let Some(count) = count {
                if !count.fract().is_zero() {
                    skip(SkipReason::FractionOfAGpu, accelerator, instance, line);
                    continue;
                }
                let prices: Vec<(&'static str, Decimal)> = [("on-demand", on_demand), ("spot", spot)]
                    .into_iter()
                    .filter_map(|(billing, p)| p.filter(|p| !p.is_zero()).map(|p| (billing, p)))
                    .collect();
                if prices.is_empty() {
                    skip(SkipReason::NoPrice, accelerator, instance, line);
                    continue;
                }
                let gpus = count.to_i32().unwrap_or(0);
                let region = cell(c_region).to_owned();
                for (billing, instance_price) in prices {
                    let rate = (instance_price / count)
                        .round_dp_with_strategy(RATE_DECIMALS, RoundingStrategy::MidpointAwayFromZero)
                        .normalize();
                    let row = PriceRow {
                        line: line as u32,
                        provider: provider.to_owned(),
                        gpu: gpu.to_owned(),
                        gpu_count: gpus,
                        billing: billing.to_owned(),
                        rate_per_gpu_hour: rate,
                        currency: CURRENCY.to_owned(),
                        region: region.clone(),
                        valid_from,
                        source: format!("skypilot:{instance}"),
                    };
                    match offers.get(&(gpu.to_owned(), gpus, region.clone(), billing)) {
                        Some(&kept) if rows[kept].rate_per_gpu_hour <= rate => {}
                        Some(&kept) => rows[kept] = row,
                        None => {
                            offers.insert((gpu.to_owned(), gpus, region.clone(), billing), rows.len());
                            rows.push(row);
                        }
                    }
                }
                if rows.len() > MAX_ROWS {
                    return Err(SheetErrors(vec![FieldError::new(
                        "file",
                        format!("more than {MAX_ROWS} offers; split the catalogue"),
                    )]));
                }
            }
        }
        if errors.len() >= MAX_ERRORS {
            errors.truncate(MAX_ERRORS);
            errors.push(FieldError::new("file", format!("stopped after {MAX_ERRORS} errors")));
            break;
        }
    }
    if !errors.is_empty() {
        return Err(SheetErrors(errors));
    }
    if rows.is_empty() {
        let left_out: Vec<String> = skipped
            .iter()
            .map(|s| format!("{} row(s) with {}", s.rows, s.reason.says()))
            .collect();
        return Err(SheetErrors(vec![FieldError::new(
            "file",
            format!(
                "no row is an offer of a GPU of the catalogue{}",
                if left_out.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", left_out.join("; "))
                }
            ),
        )]));
    }
    rows.sort_by(|a, b| a.line.cmp(&b.line).then_with(|| a.billing.cmp(&b.billing)));
    skipped.sort_by(|a, b| a.reason.cmp(&b.reason).then_with(|| b.rows.cmp(&a.rows)));
    Ok(CatalogueImport {
        rows,
        skipped,
        rows_read,
    })
}

/// Whether the GPU catalogue names `gpu` (every row of the table must).
pub fn names_a_catalogue_gpu(gpu: &str) -> bool {
    sizing::gpu_by_name(gpu).is_some_and(|g| g.model == gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, 2).unwrap()
    }

    #[test]
    fn every_accelerator_maps_to_a_catalogue_gpu_and_cites_a_source() {
        assert!(table().len() >= 15);
        for a in table() {
            assert!(
                names_a_catalogue_gpu(&a.gpu),
                "{}: {:?} is not a model of data/gpu_catalog.csv",
                a.accelerator,
                a.gpu
            );
            assert!(
                a.source.len() > 20,
                "{}: cite where the mapping comes from",
                a.accelerator
            );
        }
        // Names are matched whole, never guessed: a 16 GB V100 is not the catalogue's 32 GB one.
        assert_eq!(gpu_for("V100", "p3.2xlarge"), None);
        assert_eq!(gpu_for("v100-32gb", "p3dn.24xlarge"), Some("V100 32GB SXM2"));
        assert_eq!(gpu_for("H100", "gpu_1x_h100_pcie"), Some("H100 PCIe"));
        assert_eq!(gpu_for("H100", "p5.48xlarge"), Some("H100 SXM"));
        assert_eq!(gpu_for("A100-80GB", "Standard_NC24ads_A100_v4"), Some("A100 80GB PCIe"));
    }

    #[test]
    fn instance_prices_become_per_gpu_rates_and_zones_fold_to_the_lowest() {
        // Column order is free: Region before Price, no AvailabilityZone column at all.
        let text = "Region,InstanceType,AcceleratorName,AcceleratorCount,Price,SpotPrice\n\
                    us-east-1,p5.48xlarge,H100,8.0,98.32,30.3260\n\
                    us-east-1,p5.48xlarge,H100,8.0,98.32,20.9934\n\
                    us-east-1,p5.48xlarge,H100,8.0,99.00,\n\
                    us-east-1,p5e.48xlarge,H200,8.0,,14.4663\n\
                    us-east-1,p5e.48xlarge,H200,8.0,,\n\
                    us-east-1,m5.large,,,0.096,0.04\n\
                    us-east-1,dl1.24xlarge,Gaudi HL-205,8.0,13.10904,\n";
        let got = parse_catalogue(text.as_bytes(), "AWS", day()).unwrap();
        let rows: Vec<(u32, &str, &str, i32, String, &str)> = got
            .rows
            .iter()
            .map(|r| {
                (
                    r.line,
                    r.gpu.as_str(),
                    r.billing.as_str(),
                    r.gpu_count,
                    r.rate_per_gpu_hour.to_string(),
                    r.source.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                // 98.32 ÷ 8; the 99.00 row of the same offer is folded away.
                (2, "H100 SXM", "on-demand", 8, "12.29".into(), "skypilot:p5.48xlarge"),
                // The lowest spot price of the zones: 20.9934 ÷ 8 = 2.624175.
                (3, "H100 SXM", "spot", 8, "2.624175".into(), "skypilot:p5.48xlarge"),
                // No on-demand price: a spot row only (14.4663 ÷ 8 = 1.8082875 → 1.808288).
                (5, "H200 SXM", "spot", 8, "1.808288".into(), "skypilot:p5e.48xlarge"),
            ]
        );
        assert!(got.rows.iter().all(|r| r.currency == "USD" && r.provider == "AWS"));
        let skipped: Vec<(SkipReason, &str, u64)> = got
            .skipped
            .iter()
            .map(|s| (s.reason, s.accelerator.as_str(), s.rows))
            .collect();
        assert_eq!(
            skipped,
            [
                (SkipReason::CpuOnly, "", 1),
                (SkipReason::UnknownAccelerator, "Gaudi HL-205", 1),
                (SkipReason::NoPrice, "H200", 1),
            ]
        );
        assert_eq!(got.skipped[1].lines, [8]);
        assert_eq!(got.rows_read, 7);
    }

    #[test]
    fn a_malformed_row_refuses_the_catalogue_naming_its_cells() {
        let text = "InstanceType,AcceleratorName,AcceleratorCount,Price,SpotPrice,Region\n\
                    p4d.24xlarge,A100,8.0,32.7726,5.2117,us-east-1\n\
                    p4d.24xlarge,A100,eight,$32.77,-1,us-east-1\n\
                    g4ad.xlarge,Radeon Pro V520,0.25,0.37853,,us-east-1\n";
        let errors = parse_catalogue(text.as_bytes(), "AWS", day()).unwrap_err().0;
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "line 3, column 3 (AcceleratorCount)",
                "line 3, column 4 (Price)",
                "line 3, column 5 (SpotPrice)",
            ]
        );
        let header = parse_catalogue(b"InstanceType,Price\nx,1\n", "AWS", day())
            .unwrap_err()
            .0;
        assert!(header[0].message.contains("AcceleratorName"), "{header:?}");
        let provider = parse_catalogue(text.as_bytes(), " ", day()).unwrap_err().0;
        assert_eq!(provider[0].field, "provider");
        // A catalogue with nothing to import says why.
        let none = parse_catalogue(
            b"InstanceType,AcceleratorName,AcceleratorCount,Price,Region\nm5.large,,,0.096,us-east-1\n",
            "AWS",
            day(),
        )
        .unwrap_err()
        .0;
        assert!(none[0].message.contains("CPU-only"), "{none:?}");
    }

    #[test]
    fn a_fraction_of_a_gpu_is_skipped_not_rounded() {
        let text = "InstanceType,AcceleratorName,AcceleratorCount,Price,Region\n\
                    Standard_NV6ads_A10_v5,A10,0.167,0.454,eastus\n\
                    Standard_NV36ads_A10_v5,A10,1.0,3.2,eastus\n";
        let got = parse_catalogue(text.as_bytes(), "Azure", day()).unwrap();
        assert_eq!(got.rows.len(), 1);
        assert_eq!(got.rows[0].gpu_count, 1);
        assert_eq!(got.skipped[0].reason, SkipReason::FractionOfAGpu);
    }
}
