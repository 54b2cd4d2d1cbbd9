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

use std::{
    collections::{BTreeMap, HashMap},
    sync::LazyLock,
};

use chrono::NaiveDate;
use rust_decimal::{prelude::ToPrimitive, Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::model::{sheet_reader, PriceRow, SheetErrors, MAX_ROWS};
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

/// SkyPilot's accelerator name for a GPU of the catalogue, the other way round: the table's row
/// for it that needs no instance type (`RTX A6000` → `A6000`), else its first row (`H100 NVL` →
/// `H100`, which Azure's NC instances carry); `None` for a GPU the table does not name.
pub fn accelerator_for(gpu: &str) -> Option<&'static str> {
    let rows = || table().iter().filter(|a| a.gpu.eq_ignore_ascii_case(gpu.trim()));
    rows()
        .find(|a| a.instance_type_contains.is_empty())
        .or_else(|| rows().next())
        .map(|a| a.accelerator.as_str())
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
            !a.instance_type_contains.is_empty()
                && names_part(&instance, &a.instance_type_contains.to_ascii_lowercase())
        })
        .or_else(|| named().find(|a| a.instance_type_contains.is_empty()))
        .map(|a| a.gpu.as_str())
}

/// Whether `instance` holds `part` not followed by a letter: `h100_nvl` is in `2x-h100_nvl-…`
/// but not in Fluidstack's `h100_nvlink_80gb` (an SXM card); `standard_nc` is in
/// `standard_nc24ads_a100_v4`.
fn names_part(instance: &str, part: &str) -> bool {
    instance
        .match_indices(part)
        .any(|(at, _)| !instance[at + part.len()..].starts_with(|c: char| c.is_ascii_alphabetic()))
}

/// The GPU a row names, checked against the memory SkyPilot's `GpuInfo` gives it: where the
/// table's model has less memory than that (Cudo's 80 GB `a100-pcie` under the 40 GB A100's name,
/// its 94 GB `h100-nvl-pcie` under the H100 PCIe's), the model of the same family with that memory
/// — the PCIe card when the instance type says `pci` — else the table's. A catalogue that gives
/// less than the table's card never moves it to a lesser one: the table's explicit rows (Azure's
/// NC H100 v5 is the 94 GB H100 NVL) stand over a memory figure a fetcher rounded.
fn by_memory(mapped: &'static str, gpu_mib: Option<u64>, instance: &str) -> &'static str {
    let Some(mib) = gpu_mib.map(|m| m as f64).filter(|m| *m > 0.0) else {
        return mapped;
    };
    let near = |g: &crate::sizing::GpuSpec| (g.memory_gib * 1024.0 - mib).abs() <= 0.1 * mib;
    let Some(spec) = crate::sizing::gpu_by_name(mapped) else {
        return mapped;
    };
    if near(spec) || spec.memory_gib * 1024.0 > mib {
        return mapped;
    }
    let family = mapped.split_whitespace().next();
    let pcie = instance.to_ascii_lowercase().contains("pci");
    let same_memory: Vec<&crate::sizing::GpuSpec> = crate::sizing::gpus()
        .iter()
        .filter(|g| g.model.split_whitespace().next() == family && near(g))
        .collect();
    same_memory
        .iter()
        .find(|g| g.model.contains("PCIe") == pcie)
        .or(same_memory.first())
        .map_or(mapped, |g| g.model.as_str())
}

/// What SkyPilot's `GpuInfo` cell (a Python dict's text: `{'Gpus': [{… 'Count': 2, 'MemoryInfo':
/// {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 81920}`) says of the GPUs' memory, and the row's
/// GPU count.
#[derive(Debug, Clone, Copy, Default)]
struct GpuMemory {
    size: Option<u64>,
    total: Option<u64>,
    gpus: u64,
}

fn gpu_info_memory(cell: &str, count: Option<Decimal>) -> GpuMemory {
    let number_after = |key: &str| -> Option<u64> {
        let at = cell.find(key)?;
        let digits: String = cell[at..]
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    GpuMemory {
        size: number_after("SizeInMiB"),
        total: number_after("TotalGpuMemoryInMiB"),
        gpus: count
            .filter(|c| c.fract().is_zero() && *c >= Decimal::ONE)
            .and_then(|c| u64::try_from(c).ok())
            .unwrap_or(1),
    }
}

/// One GPU's memory in `mapped`'s family. Fetchers differ on `SizeInMiB`: AWS's is one GPU's
/// beside a larger total (a p4d's 40960 of 327680); Vast's and PrimeIntellect's the whole
/// instance's, equal to the total (two 40 GB A100s: 81920 and 81920); Lambda's one GPU's, equal to a
/// total that is one GPU's too (eight V100: 16384 and 16384). Where the two are equal on several
/// GPUs, the share of one GPU is taken when it is a card of the family (two A100s of 81920: the
/// 40 GB card), else `SizeInMiB` (eight H100 NVL of 95830 each: no H100 has 12 GB).
fn per_gpu_mib(mapped: &str, m: GpuMemory) -> Option<u64> {
    let size = m.size.or(m.total)?;
    if m.gpus <= 1 || m.total.is_none_or(|t| t > size) {
        return Some(size);
    }
    let share = size / m.gpus;
    let family = mapped.split_whitespace().next();
    let a_card = crate::sizing::gpus().iter().any(|g| {
        g.model.split_whitespace().next() == family
            && (g.memory_gib * 1024.0 - share as f64).abs() <= 0.1 * share as f64
    });
    Some(if a_card { share } else { size })
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
    /// A Google Cloud accelerator row whose host VM (SkyPilot's pairing) has no row in the same zone.
    HostMissing,
    /// A Google Cloud accelerator row (no `InstanceType`) that `data/skypilot_gcp_hosts.csv` pairs with no host VM.
    NoHostPairing,
    /// A rate per GPU-hour that rounds to 0 or is above 1,000,000 (a sheet refuses both).
    RateOutOfRange,
}

impl SkipReason {
    pub fn says(&self) -> &'static str {
        match self {
            SkipReason::CpuOnly => "no GPU (a CPU-only instance)",
            SkipReason::UnknownAccelerator => "an accelerator the GPU catalogue does not name",
            SkipReason::FractionOfAGpu => "a fraction of a GPU per instance",
            SkipReason::NoPrice => "neither an on-demand nor a spot price",
            SkipReason::HostMissing => "GPUs priced without their host VM: host price not in this file",
            SkipReason::NoHostPairing => "GPUs priced without a host VM, and no host VM is known for them",
            SkipReason::RateOutOfRange => "a rate per GPU-hour that rounds to 0 or is above 1,000,000",
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

/// An `AcceleratorCount` the table of known instance shapes contradicts: the known count is used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CountCorrected {
    pub instance_type: String,
    /// What the catalogue says.
    pub catalogue_count: String,
    /// What the instance has (`data/instance_shapes.csv`), used for the rates.
    pub known_count: i32,
    pub rows: u64,
    pub lines: Vec<u32>,
}

/// A catalogue read: the price rows to store and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogueImport {
    pub rows: Vec<PriceRow>,
    pub skipped: Vec<Skipped>,
    /// Catalogue rows read (without the header).
    pub rows_read: u64,
    /// Rows whose GPU count was corrected from the known instance shapes.
    pub corrected: Vec<CountCorrected>,
    /// Every instance type the catalogue prices with its GPUs per instance, the cheaper ones' and
    /// the dearer ones' alike (only the cheapest of an offer becomes a price row): a bill names
    /// the instance it ran on, and `g5.4xlarge` has one A10G though `g5.xlarge` is the offer kept.
    pub instance_gpus: Vec<(String, i32)>,
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
    /// A catalogue: instance types whose `AcceleratorCount` the known shapes contradict (the
    /// known count priced them), with both figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<&'a [CountCorrected]>,
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
            corrected: catalogue.then_some(import.corrected.as_slice()),
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

/// One row of `data/skypilot_gcp_hosts.csv`: the host VMs SkyPilot runs a Google Cloud accelerator
/// and count on (`_ACC_INSTANCE_TYPE_DICTS` in its `gcp_catalog.py`).
#[derive(Debug, Clone, Deserialize)]
pub struct GcpHost {
    pub accelerator: String,
    pub count: u32,
    /// Several host types separated by `;`: the cheapest in the zone is taken, as SkyPilot does.
    pub host_instance_types: String,
    pub source: String,
}

/// One row of `data/instance_shapes.csv`: how many accelerators an instance type really has.
#[derive(Debug, Clone, Deserialize)]
pub struct InstanceShape {
    pub instance_type: String,
    pub accelerator: String,
    pub count: i32,
    pub source: String,
}

fn embedded<T: serde::de::DeserializeOwned>(csv: &str, name: &str) -> Vec<T> {
    ::csv::Reader::from_reader(csv.as_bytes())
        .deserialize()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{name} is malformed: {e}"))
}

/// The Google Cloud host pairing, parsed once. A malformed table panics at first use; a unit test parses it.
pub fn gcp_hosts() -> &'static [GcpHost] {
    static TABLE: LazyLock<Vec<GcpHost>> = LazyLock::new(|| {
        embedded(
            include_str!("../../data/skypilot_gcp_hosts.csv"),
            "data/skypilot_gcp_hosts.csv",
        )
    });
    &TABLE
}

/// The known instance shapes, parsed once, by lower-case instance type.
pub fn instance_shapes() -> &'static HashMap<String, InstanceShape> {
    static TABLE: LazyLock<HashMap<String, InstanceShape>> = LazyLock::new(|| {
        embedded::<InstanceShape>(
            include_str!("../../data/instance_shapes.csv"),
            "data/instance_shapes.csv",
        )
        .into_iter()
        .map(|s| (s.instance_type.to_ascii_lowercase(), s))
        .collect()
    });
    &TABLE
}

/// The host VMs SkyPilot pairs with `count` × `accelerator` on Google Cloud (lower case).
fn host_types_for(accelerator: &str, count: u32) -> Option<Vec<String>> {
    gcp_hosts()
        .iter()
        .find(|h| h.count == count && h.accelerator.eq_ignore_ascii_case(accelerator))
        .map(|h| {
            h.host_instance_types
                .split(';')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect()
        })
}

/// Whether an instance type is a host of some Google Cloud accelerator (its row is kept for pairing).
fn is_gcp_host(instance: &str) -> bool {
    static HOSTS: LazyLock<std::collections::HashSet<String>> = LazyLock::new(|| {
        gcp_hosts()
            .iter()
            .flat_map(|h| h.host_instance_types.split(';').map(|t| t.trim().to_ascii_lowercase()))
            .collect()
    });
    HOSTS.contains(&instance.to_ascii_lowercase())
}

/// Largest rate per GPU-hour a row may give, as for a sheet.
const MAX_RATE: i64 = 1_000_000;

/// A host VM row kept for pairing: its prices and line.
#[derive(Debug, Clone)]
struct HostRow {
    instance: String,
    on_demand: Option<Decimal>,
    spot: Option<Decimal>,
    line: usize,
    used: bool,
}

/// A Google Cloud accelerator row waiting for its host VM.
#[derive(Debug, Clone)]
struct AcceleratorRow {
    accelerator: String,
    count: Decimal,
    region: String,
    zone: String,
    on_demand: Option<Decimal>,
    spot: Option<Decimal>,
    line: usize,
}

/// What the pass keeps: offers (the cheapest row of each) and what was left out, grouped by maps
/// so that a file's cost grows with its rows only.
struct Book<'p> {
    provider: &'p str,
    valid_from: NaiveDate,
    /// Offer → index in `rows`; the lowest price of an offer is kept.
    offers: HashMap<(String, i32, String, &'static str), usize>,
    rows: Vec<PriceRow>,
    skipped: Vec<Skipped>,
    skipped_at: HashMap<(SkipReason, String), usize>,
    corrected: Vec<CountCorrected>,
    corrected_at: HashMap<String, usize>,
    /// Instance type → GPUs per instance, of every row priced as an offer.
    instance_gpus: BTreeMap<String, i32>,
}

impl Book<'_> {
    fn skip(&mut self, reason: SkipReason, accelerator: &str, instance: &str, line: usize) {
        let skipped = &mut self.skipped;
        let i = *self
            .skipped_at
            .entry((reason, accelerator.to_owned()))
            .or_insert_with(|| {
                skipped.push(Skipped {
                    reason,
                    accelerator: accelerator.to_owned(),
                    rows: 0,
                    instance_types: Vec::new(),
                    lines: Vec::new(),
                });
                skipped.len() - 1
            });
        let group = &mut self.skipped[i];
        group.rows += 1;
        if group.lines.len() < MAX_EXAMPLES {
            group.lines.push(line as u32);
        }
        // At most MAX_EXAMPLES names to compare: constant per row.
        if group.instance_types.len() < MAX_EXAMPLES && !group.instance_types.iter().any(|t| t == instance) {
            group.instance_types.push(instance.to_owned());
        }
    }

    fn correct(&mut self, instance: &str, catalogue_count: &str, known_count: i32, line: usize) {
        let corrected = &mut self.corrected;
        let i = *self
            .corrected_at
            .entry(instance.to_ascii_lowercase())
            .or_insert_with(|| {
                corrected.push(CountCorrected {
                    instance_type: instance.to_owned(),
                    catalogue_count: catalogue_count.to_owned(),
                    known_count,
                    rows: 0,
                    lines: Vec::new(),
                });
                corrected.len() - 1
            });
        let c = &mut self.corrected[i];
        c.rows += 1;
        if c.lines.len() < MAX_EXAMPLES {
            c.lines.push(line as u32);
        }
    }

    /// Prices one instance (its on-demand and spot price for `count` GPUs) as offers; a rate that
    /// rounds to 0 or is absurd is left out and listed, the row's other price still counts.
    #[allow(clippy::too_many_arguments)]
    fn offer(
        &mut self,
        gpu: &str,
        accelerator: &str,
        instance: &str,
        count: Decimal,
        region: &str,
        on_demand: Option<Decimal>,
        spot: Option<Decimal>,
        line: usize,
    ) {
        let prices: Vec<(&'static str, Decimal)> = [("on-demand", on_demand), ("spot", spot)]
            .into_iter()
            .filter_map(|(billing, p)| p.filter(|p| !p.is_zero()).map(|p| (billing, p)))
            .collect();
        if prices.is_empty() {
            self.skip(SkipReason::NoPrice, accelerator, instance, line);
            return;
        }
        let gpus = count.to_i32().unwrap_or(0);
        if gpus > 0 {
            self.instance_gpus.insert(instance.to_owned(), gpus);
        }
        let mut refused = false;
        for (billing, instance_price) in prices {
            let rate = (instance_price / count)
                .round_dp_with_strategy(RATE_DECIMALS, RoundingStrategy::MidpointAwayFromZero)
                .normalize();
            if rate.is_zero() || rate > Decimal::from(MAX_RATE) {
                refused = true;
                continue;
            }
            let row = PriceRow {
                line: line as u32,
                provider: self.provider.to_owned(),
                gpu: gpu.to_owned(),
                gpu_count: gpus,
                billing: billing.to_owned(),
                rate_per_gpu_hour: rate,
                currency: CURRENCY.to_owned(),
                region: region.to_owned(),
                valid_from: self.valid_from,
                source: format!("skypilot:{instance}"),
            };
            let key = (gpu.to_owned(), gpus, region.to_owned(), billing);
            match self.offers.get(&key) {
                Some(&kept) if self.rows[kept].rate_per_gpu_hour <= rate => {}
                Some(&kept) => self.rows[kept] = row,
                None => {
                    self.offers.insert(key, self.rows.len());
                    self.rows.push(row);
                }
            }
        }
        if refused {
            self.skip(SkipReason::RateOutOfRange, accelerator, instance, line);
        }
    }
}

/// Reads a whole catalogue for `provider`, each row valid from `valid_from`. All or nothing for
/// malformed rows; rows that are not offers of a known GPU are skipped and listed.
///
/// Google Cloud's catalogue prices the GPUs apart from their host VM: an accelerator row has no
/// `InstanceType`, and is priced with the host VM SkyPilot pairs it with (`data/skypilot_gcp_hosts.csv`)
/// in the same region and zone, each price summed, as SkyPilot quotes `--gpus H100:8`. A known
/// instance shape (`data/instance_shapes.csv`) overrides a wrong `AcceleratorCount`, listed.
pub fn parse_catalogue(text: &[u8], provider: &str, valid_from: NaiveDate) -> Result<CatalogueImport, SheetErrors> {
    let provider = provider.trim();
    if provider.is_empty() || provider.chars().count() > 200 || provider.chars().any(char::is_control) {
        return Err(SheetErrors(vec![FieldError::new(
            "provider",
            "name the provider whose catalogue this is (1 to 200 characters), e.g. provider=AWS",
        )]));
    }
    let (mut rdr, header) = sheet_reader(text)?;
    let h = CatalogueHeader::read(&header)?;
    let mut pass = Pass {
        book: Book {
            provider,
            valid_from,
            offers: HashMap::new(),
            rows: Vec::new(),
            skipped: Vec::new(),
            skipped_at: HashMap::new(),
            corrected: Vec::new(),
            corrected_at: HashMap::new(),
            instance_gpus: BTreeMap::new(),
        },
        hosts: HashMap::new(),
        accelerators: Vec::new(),
        errors: Vec::new(),
    };
    let mut rows_read = 0u64;
    for (i, record) in rdr.records().enumerate() {
        let line = i + 2;
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                pass.errors
                    .push(FieldError::new(format!("line {line}"), format!("unreadable CSV: {e}")));
                break;
            }
        };
        if record.iter().all(str::is_empty) {
            continue;
        }
        rows_read += 1;
        if record.len() != header.len() {
            pass.errors.push(FieldError::new(
                format!("line {line}"),
                format!("expected {} fields, found {}", header.len(), record.len()),
            ));
        } else {
            pass.read_row(&h, &record, line)?;
        }
        if pass.errors.len() >= MAX_ERRORS {
            pass.errors.truncate(MAX_ERRORS);
            pass.errors
                .push(FieldError::new("file", format!("stopped after {MAX_ERRORS} errors")));
            break;
        }
    }
    if !pass.errors.is_empty() {
        return Err(SheetErrors(pass.errors));
    }
    pass.pair_accelerators()?;
    let mut unused: Vec<&HostRow> = pass.hosts.values().filter(|h| !h.used).collect();
    unused.sort_by_key(|h| h.line);
    for h in unused {
        pass.book.skip(SkipReason::CpuOnly, "", &h.instance, h.line);
    }
    catalogue_import(pass.book, rows_read)
}

/// Where the catalogue's columns are.
struct CatalogueHeader {
    instance: usize,
    name: usize,
    count: usize,
    price: usize,
    region: usize,
    spot: Option<usize>,
    zone: Option<usize>,
    gpu_info: Option<usize>,
}

impl CatalogueHeader {
    /// The header's columns; an error naming those it lacks.
    fn read(header: &[String]) -> Result<Self, SheetErrors> {
        let find = |name: &str| header.iter().position(|h| h == name);
        let missing: Vec<&str> = REQUIRED_COLUMNS.iter().copied().filter(|c| find(c).is_none()).collect();
        if !missing.is_empty() {
            return Err(SheetErrors(vec![FieldError::new(
                "line 1",
                format!(
                    "a SkyPilot vms.csv names the columns {}; this header lacks {}{}",
                    REQUIRED_COLUMNS.join(", "),
                    missing.join(", "),
                    super::detect::belongs_elsewhere(header, super::detect::Import::Catalogue)
                ),
            )]));
        }
        let column = |name: &str| find(name).expect("checked above");
        Ok(Self {
            instance: column("InstanceType"),
            name: column("AcceleratorName"),
            count: column("AcceleratorCount"),
            price: column("Price"),
            region: column("Region"),
            spot: find("SpotPrice"),
            zone: find("AvailabilityZone"),
            gpu_info: find("GpuInfo"),
        })
    }
}

/// One catalogue row's cells, checked.
struct CatalogueRow<'r> {
    instance: &'r str,
    accelerator: &'r str,
    region: &'r str,
    zone: &'r str,
    /// The AcceleratorCount as written, and as read (rows with an accelerator only).
    count_cell: &'r str,
    count: Option<Decimal>,
    /// A Google Cloud host VM (no accelerator, an instance type its accelerators are paired with).
    host: bool,
    on_demand: Option<Decimal>,
    spot: Option<Decimal>,
    /// What `GpuInfo` says of the GPUs' memory, where the file has it.
    gpu_memory: Option<GpuMemory>,
}

impl<'r> CatalogueRow<'r> {
    /// The row's cells at `line`, each error added to `errors`.
    fn read(h: &CatalogueHeader, record: &'r ::csv::StringRecord, line: usize, errors: &mut Vec<FieldError>) -> Self {
        let cell = |c: usize| record.get(c).unwrap_or("");
        let instance = cell(h.instance);
        let accelerator = cell(h.name);
        let text_ok = |s: &str| s.chars().count() <= 200 && !s.chars().any(char::is_control);
        // An empty InstanceType is Google Cloud's accelerator row; without an accelerator either,
        // the row names nothing.
        if (instance.is_empty() && accelerator.is_empty()) || !text_ok(instance) {
            errors.push(cell_error(
                line,
                h.instance,
                "InstanceType",
                "an instance type of 1 to 200 characters is required (or, as Google Cloud writes, an accelerator without one)",
            ));
        }
        for (c, name) in [(Some(h.region), "Region"), (h.zone, "AvailabilityZone")] {
            if let Some(c) = c.filter(|&c| !text_ok(cell(c))) {
                errors.push(cell_error(line, c, name, "must be at most 200 characters"));
            }
        }
        let count = match Decimal::from_str_exact(cell(h.count)) {
            _ if accelerator.is_empty() => None,
            Ok(n) if n > Decimal::ZERO && n <= Decimal::from(4096) => Some(n),
            _ => {
                errors.push(cell_error(
                    line,
                    h.count,
                    "AcceleratorCount",
                    format!(
                        "must be the number of {accelerator} per instance, above 0 and at most 4096 (got {:?})",
                        cell(h.count)
                    ),
                ));
                None
            }
        };
        // Prices are read where they count: rows with GPUs, and the host VMs of Google Cloud's.
        let host = accelerator.is_empty() && is_gcp_host(instance);
        let priced = !accelerator.is_empty() || host;
        let on_demand = price(if priced { cell(h.price) } else { "" }).unwrap_or_else(|m| {
            errors.push(cell_error(line, h.price, "Price", m));
            None
        });
        let spot = h.spot.filter(|_| priced).and_then(|c| {
            price(cell(c)).unwrap_or_else(|m| {
                errors.push(cell_error(line, c, "SpotPrice", m));
                None
            })
        });
        CatalogueRow {
            instance,
            accelerator,
            region: cell(h.region),
            zone: h.zone.map(cell).unwrap_or(""),
            count_cell: cell(h.count),
            count,
            host,
            on_demand,
            spot,
            gpu_memory: h.gpu_info.map(|c| gpu_info_memory(cell(c), count)),
        }
    }
}

/// What the pass over the rows keeps: the book of offers, Google Cloud's host VM rows by (region,
/// zone, instance type) and its accelerator rows to pair, and the errors.
struct Pass<'p> {
    book: Book<'p>,
    hosts: HashMap<(String, String, String), HostRow>,
    accelerators: Vec<AcceleratorRow>,
    errors: Vec<FieldError>,
}

impl Pass<'_> {
    /// One row: an offer, a host VM or an accelerator row kept for pairing, a row left out and
    /// listed, or errors; an error when the offers grow past the limit.
    fn read_row(&mut self, h: &CatalogueHeader, record: &::csv::StringRecord, line: usize) -> Result<(), SheetErrors> {
        let mut row_errors = Vec::new();
        let r = CatalogueRow::read(h, record, line, &mut row_errors);
        if !row_errors.is_empty() {
            self.errors.extend(row_errors);
            return Ok(());
        }
        if r.accelerator.is_empty() {
            if r.host {
                // Kept for its accelerators; listed as CPU-only at the end if none uses it.
                let key = (r.region.to_owned(), r.zone.to_owned(), r.instance.to_ascii_lowercase());
                self.hosts.entry(key).or_insert(HostRow {
                    instance: r.instance.to_owned(),
                    on_demand: r.on_demand,
                    spot: r.spot,
                    line,
                    used: false,
                });
            } else {
                self.book.skip(SkipReason::CpuOnly, "", r.instance, line);
            }
            return Ok(());
        }
        let Some(count) = r.count else { return Ok(()) };
        if r.instance.is_empty() {
            self.accelerators.push(AcceleratorRow {
                accelerator: r.accelerator.to_owned(),
                count,
                region: r.region.to_owned(),
                zone: r.zone.to_owned(),
                on_demand: r.on_demand,
                spot: r.spot,
                line,
            });
            return Ok(());
        }
        let Some(gpu) = gpu_for(r.accelerator, r.instance) else {
            self.book
                .skip(SkipReason::UnknownAccelerator, r.accelerator, r.instance, line);
            return Ok(());
        };
        let gpu = by_memory(gpu, r.gpu_memory.and_then(|m| per_gpu_mib(gpu, m)), r.instance);
        if !count.fract().is_zero() {
            self.book
                .skip(SkipReason::FractionOfAGpu, r.accelerator, r.instance, line);
            return Ok(());
        }
        let count = match instance_shapes().get(&r.instance.to_ascii_lowercase()) {
            Some(shape) if Decimal::from(shape.count) != count => {
                self.book.correct(r.instance, r.count_cell, shape.count, line);
                Decimal::from(shape.count)
            }
            _ => count,
        };
        self.book.offer(
            gpu,
            r.accelerator,
            r.instance,
            count,
            r.region,
            r.on_demand,
            r.spot,
            line,
        );
        if self.book.rows.len() > MAX_ROWS {
            return Err(too_many_offers());
        }
        Ok(())
    }

    /// Google Cloud's accelerator rows, each with the cheapest of its host VMs in the same zone.
    fn pair_accelerators(&mut self) -> Result<(), SheetErrors> {
        let (book, hosts) = (&mut self.book, &mut self.hosts);
        for a in &self.accelerators {
            let whole = a.count.fract().is_zero();
            let Some(host_types) = a
                .count
                .to_u32()
                .filter(|_| whole)
                .and_then(|n| host_types_for(&a.accelerator, n))
            else {
                let reason = if gpu_for(&a.accelerator, "").is_none() {
                    SkipReason::UnknownAccelerator
                } else if !whole {
                    SkipReason::FractionOfAGpu
                } else {
                    SkipReason::NoHostPairing
                };
                book.skip(reason, &a.accelerator, "", a.line);
                continue;
            };
            let host = host_types
                .iter()
                .filter_map(|t| hosts.get(&(a.region.clone(), a.zone.clone(), t.clone())))
                .min_by_key(|h| h.on_demand.unwrap_or(Decimal::MAX))
                .map(|h| (h.instance.clone(), h.on_demand, h.spot));
            let Some((host_instance, host_on_demand, host_spot)) = host else {
                book.skip(
                    SkipReason::HostMissing,
                    &a.accelerator,
                    &host_types.join(" or "),
                    a.line,
                );
                continue;
            };
            let Some(gpu) = gpu_for(&a.accelerator, &host_instance) else {
                book.skip(SkipReason::UnknownAccelerator, &a.accelerator, &host_instance, a.line);
                continue;
            };
            if let Some(h) = hosts.get_mut(&(a.region.clone(), a.zone.clone(), host_instance.to_ascii_lowercase())) {
                h.used = true;
            }
            // Both parts of a price, or no price of that billing.
            let sum = |gpus: Option<Decimal>, host: Option<Decimal>| gpus.zip(host).and_then(|(g, h)| g.checked_add(h));
            book.offer(
                gpu,
                &a.accelerator,
                &host_instance,
                a.count,
                &a.region,
                sum(a.on_demand, host_on_demand),
                sum(a.spot, host_spot),
                a.line,
            );
            if book.rows.len() > MAX_ROWS {
                return Err(too_many_offers());
            }
        }
        Ok(())
    }
}

/// The offers and what was left out, in file order; an error when no row is an offer.
fn catalogue_import(book: Book<'_>, rows_read: u64) -> Result<CatalogueImport, SheetErrors> {
    let Book {
        mut rows,
        mut skipped,
        corrected,
        instance_gpus,
        ..
    } = book;
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
    for s in &mut skipped {
        s.lines.sort_unstable();
    }
    Ok(CatalogueImport {
        rows,
        skipped,
        rows_read,
        corrected,
        instance_gpus: instance_gpus.into_iter().collect(),
    })
}

fn too_many_offers() -> SheetErrors {
    SheetErrors(vec![FieldError::new(
        "file",
        format!("more than {MAX_ROWS} offers; split the catalogue"),
    )])
}

/// Whether the GPU catalogue names `gpu` (every row of the table must).
pub fn names_a_catalogue_gpu(gpu: &str) -> bool {
    sizing::gpu_by_name(gpu).is_some_and(|g| g.model == gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gpus_memory_whatever_the_fetcher_wrote() {
        let memory = |size: u64, total: u64, gpus: u64| GpuMemory {
            size: Some(size),
            total: Some(total),
            gpus,
        };
        // AWS p4d: one GPU's beside the instance's total.
        assert_eq!(per_gpu_mib("A100 40GB SXM", memory(40960, 327_680, 8)), Some(40960));
        // Vast: the instance's, twice.
        assert_eq!(per_gpu_mib("A100 40GB SXM", memory(81920, 81920, 2)), Some(40960));
        assert_eq!(per_gpu_mib("H100 SXM", memory(191_660, 191_660, 2)), Some(95830));
        // Lambda: one GPU's, twice; an eighth of it is no card of the family.
        assert_eq!(per_gpu_mib("V100", memory(16384, 16384, 8)), Some(16384));
        assert_eq!(per_gpu_mib("H100 SXM", memory(95830, 95830, 8)), Some(95830));
        // One GPU, or no total: the size as written.
        assert_eq!(per_gpu_mib("A100 40GB SXM", memory(81920, 81920, 1)), Some(81920));
        let no_total = GpuMemory {
            size: Some(81920),
            total: None,
            gpus: 2,
        };
        assert_eq!(per_gpu_mib("A100 40GB SXM", no_total), Some(81920));
    }

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
        // RunPod's plain names are its PCIe cards, its SXM cards say so (SkyPilot's RunPod
        // catalogue); Vast's H100 NVL says NVL only in its instance type.
        assert_eq!(gpu_for("H100", "1x_H100_SECURE"), Some("H100 PCIe"));
        assert_eq!(gpu_for("A100-80GB", "8x_A100-80GB_COMMUNITY"), Some("A100 80GB PCIe"));
        assert_eq!(gpu_for("H100-SXM", "8x_H100-SXM_SECURE"), Some("H100 SXM"));
        assert_eq!(
            gpu_for("A100-80GB-SXM", "8x_A100-80GB-SXM_SECURE"),
            Some("A100 80GB SXM")
        );
        assert_eq!(gpu_for("H200-SXM", "8x_H200-SXM_SECURE"), Some("H200 SXM"));
        assert_eq!(gpu_for("H100", "2x-H100_NVL-32-65536"), Some("H100 NVL"));
        // Fluidstack's NVLink (SXM) H100 is no H100 NVL (skypilot-org/skypilot-catalog
        // catalogs/v6/fluidstack/vms.csv @ 002403bc: H100_NVLINK_80GB::8, 81920 MiB).
        assert_eq!(gpu_for("H100", "H100_NVLINK_80GB::8"), Some("H100 SXM"));
        // The way back names each GPU as the big clouds' catalogues do.
        assert_eq!(accelerator_for("H100 SXM"), Some("H100"));
        assert_eq!(accelerator_for("A100 80GB SXM"), Some("A100-80GB"));
    }

    #[test]
    fn the_memory_skypilot_gives_a_gpu_picks_among_its_family() {
        // Cudo's rows (skypilot-org/skypilot-catalog catalogs/v7/cudo/vms.csv @ 16f33dd5): 80 GB
        // A100s, one type saying `pcie` (read as the 40 GB PCIe card), one `pci` (read as the
        // 40 GB SXM), and a 94 GB H100 NVL whose type says `pcie` (read as the H100 PCIe).
        let info = |mib: u32| {
            format!("\"{{'Gpus': [{{'Name': 'X', 'Manufacturer': 'NVIDIA', 'Count': 1.0, 'MemoryInfo': {{'SizeInMiB': {mib}}}}}], 'TotalGpuMemoryInMiB': {mib}}}\"")
        };
        let text = format!(
            "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n\
             epyc-genoa-a100-pcie_1x2v4gb,A100,1.0,2,4,1.5294,no-kristiansand-1,{},\n\
             intel-ice-lake-a100-pci_1x2v4gb,A100,1.0,2,4,1.3734000000000002,us-carlsbad-1,{},\n\
             epyc-genoa-h100-nvl-pcie_1x2v4gb,H100,1.0,2,4,2.4994,au-melbourne-1,{},\n\
             p5.48xlarge,H100,8.0,192,2048,98.32,us-east-1,{},\n",
            info(81920),
            info(81920),
            info(96256),
            info(81920)
        );
        let got = parse_catalogue(text.as_bytes(), "Cudo", day()).unwrap();
        let gpus: Vec<&str> = rows_of(&got).iter().map(|r| r.1).collect();
        assert_eq!(gpus, ["A100 80GB PCIe", "A100 80GB PCIe", "H100 NVL", "H100 SXM"]);
        // Less memory than the table's card moves nothing: Azure's NC H100 v5 stays the H100 NVL.
        let text = format!(
            "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n\
             Standard_NC40ads_H100_v5,H100,1.0,40,320,6.98,eastus,{},\n",
            info(81920)
        );
        let got = parse_catalogue(text.as_bytes(), "Azure", day()).unwrap();
        assert_eq!(rows_of(&got)[0].1, "H100 NVL");
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
        assert_eq!(
            rows_of(&got),
            [
                // 98.32 ÷ 8; the 99.00 row of the same offer is folded away.
                (
                    2,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "12.29".into(),
                    "us-east-1",
                    "skypilot:p5.48xlarge"
                ),
                // The lowest spot price of the zones: 20.9934 ÷ 8 = 2.624175.
                (
                    3,
                    "H100 SXM",
                    "spot",
                    8,
                    "2.624175".into(),
                    "us-east-1",
                    "skypilot:p5.48xlarge"
                ),
                // No on-demand price: a spot row only (14.4663 ÷ 8 = 1.8082875 → 1.808288).
                (
                    5,
                    "H200 SXM",
                    "spot",
                    8,
                    "1.808288".into(),
                    "us-east-1",
                    "skypilot:p5e.48xlarge"
                ),
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

    /// (line, GPU, billing, GPUs, rate, region, source) of each row, for comparing.
    fn rows_of(got: &CatalogueImport) -> Vec<(u32, &str, &str, i32, String, &str, &str)> {
        got.rows
            .iter()
            .map(|r| {
                (
                    r.line,
                    r.gpu.as_str(),
                    r.billing.as_str(),
                    r.gpu_count,
                    r.rate_per_gpu_hour.to_string(),
                    r.region.as_str(),
                    r.source.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn google_clouds_gpu_rows_are_priced_with_their_host_vm_in_the_same_zone() {
        // Real rows of SkyPilot's catalogs/v7/gcp/vms.csv (tests/fixtures/skypilot-catalog/PROVENANCE.md).
        let text = include_str!("../../tests/fixtures/skypilot-catalog/gcp-vms-v7-excerpt.csv");
        let got = parse_catalogue(text.as_bytes(), "GCP", day()).unwrap();
        assert_eq!(
            rows_of(&got),
            [
                // A100-80GB × 8 with a2-ultragpu-8g in us-central1-a:
                // (8.79698 + 14.76958) ÷ 8 = 2.94582; spot (3.51864 + 12.5696) ÷ 8 = 2.01103.
                (
                    10,
                    "A100 80GB SXM",
                    "on-demand",
                    8,
                    "2.94582".into(),
                    "us-central1",
                    "skypilot:a2-ultragpu-8g"
                ),
                (
                    10,
                    "A100 80GB SXM",
                    "spot",
                    8,
                    "2.01103".into(),
                    "us-central1",
                    "skypilot:a2-ultragpu-8g"
                ),
                // H100 × 8 with a3-highgpu-8g: (9.46006 + 36.56073) ÷ 8 = 5.75259875 → 5.752599 per
                // GPU-hour, where the GPU row alone would give 36.56073 ÷ 8 = 4.570091; spot
                // (2.17547 + 18.024) ÷ 8 = 2.52493375 → 2.524934. The zones b and c say the same.
                (
                    13,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "5.752599".into(),
                    "us-central1",
                    "skypilot:a3-highgpu-8g"
                ),
                (
                    13,
                    "H100 SXM",
                    "spot",
                    8,
                    "2.524934".into(),
                    "us-central1",
                    "skypilot:a3-highgpu-8g"
                ),
                // us-east4-a: (9.46006 + 78.37241) ÷ 8 = 10.97905875; spot (1.70352 + 14.1056) ÷ 8 = 1.97614.
                (
                    16,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "10.979059".into(),
                    "us-east4",
                    "skypilot:a3-highgpu-8g"
                ),
                (
                    16,
                    "H100 SXM",
                    "spot",
                    8,
                    "1.97614".into(),
                    "us-east4",
                    "skypilot:a3-highgpu-8g"
                ),
                // H100-MEGA × 8 with a3-megagpu-8g (9.46006 + 82.75421) ÷ 8 = 11.526784 is the same offer
                // (H100 SXM × 8 in us-central1) at a higher price: the lower one is kept.
            ]
        );
        let skipped: Vec<(SkipReason, &str, u64, &[u32])> = got
            .skipped
            .iter()
            .map(|s| (s.reason, s.accelerator.as_str(), s.rows, s.lines.as_slice()))
            .collect();
        assert_eq!(
            skipped,
            [
                (SkipReason::CpuOnly, "", 1, &[9][..]),
                // No a3-highgpu-8g row in asia-northeast3: never priced as the GPUs alone.
                (SkipReason::HostMissing, "H100", 1, &[12][..]),
                (SkipReason::HostMissing, "L4", 1, &[18][..]),
            ]
        );
        assert_eq!(got.skipped[1].instance_types, ["a3-highgpu-8g"]);
        assert_eq!(got.rows_read, 17);
        assert!(got.corrected.is_empty());
    }

    #[test]
    fn a_known_instance_shape_corrects_a_wrong_gpu_count_and_says_so() {
        // Real rows of SkyPilot's catalogs/v6/azure/vms.csv: Standard_ND96isr_H100_v5 with
        // AcceleratorCount 12, where the VM has 8 H100s.
        let text = include_str!("../../tests/fixtures/skypilot-catalog/azure-vms-v6-excerpt.csv");
        let got = parse_catalogue(text.as_bytes(), "Azure", day()).unwrap();
        let h100: Vec<_> = rows_of(&got)
            .into_iter()
            .filter(|r| r.6 == "skypilot:Standard_ND96isr_H100_v5")
            .collect();
        assert_eq!(
            h100,
            [
                // 98.32 ÷ 8 = 12.29 per GPU-hour, not 98.32 ÷ 12 = 8.19; the catalogue's SpotPrice
                // equals its Price, and is taken as written.
                (
                    8,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "12.29".into(),
                    "eastus",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
                (
                    8,
                    "H100 SXM",
                    "spot",
                    8,
                    "12.29".into(),
                    "eastus",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
                (
                    9,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "12.29".into(),
                    "eastus2",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
                (
                    9,
                    "H100 SXM",
                    "spot",
                    8,
                    "12.29".into(),
                    "eastus2",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
                // 127.816 ÷ 8 = 15.977.
                (
                    10,
                    "H100 SXM",
                    "on-demand",
                    8,
                    "15.977".into(),
                    "westus",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
                (
                    10,
                    "H100 SXM",
                    "spot",
                    8,
                    "15.977".into(),
                    "westus",
                    "skypilot:Standard_ND96isr_H100_v5"
                ),
            ]
        );
        assert_eq!(
            got.corrected,
            [CountCorrected {
                instance_type: "Standard_ND96isr_H100_v5".into(),
                catalogue_count: "12".into(),
                known_count: 8,
                rows: 3,
                lines: vec![8, 9, 10],
            }]
        );
        // A count that agrees is not listed: ND96amsr_A100_v4 is 8 × A100 80GB, 32.77 ÷ 8 = 4.09625.
        let a100 = got
            .rows
            .iter()
            .find(|r| r.source == "skypilot:Standard_ND96amsr_A100_v4" && r.billing == "on-demand")
            .unwrap();
        assert_eq!(
            (a100.gpu_count, a100.rate_per_gpu_hour.to_string()),
            (8, "4.09625".into())
        );
    }

    #[test]
    fn rates_that_round_to_zero_or_are_absurd_are_left_out_per_row() {
        let text = "InstanceType,AcceleratorName,AcceleratorCount,Price,SpotPrice,Region\n\
                    p5.48xlarge,H100,8,0.0000004,1e-8,us-east-1\n\
                    p5.48xlarge,H100,8,1000000000,20.9934,us-west-2\n\
                    p4d.24xlarge,A100,8,32.7726,5.2117,us-east-1\n";
        let got = parse_catalogue(text.as_bytes(), "AWS", day()).unwrap();
        // Line 2: 0.0000004 ÷ 8 and 1e-8 ÷ 8 round to 0 at 6 places; line 3: 1,000,000,000 ÷ 8 =
        // 125,000,000 per GPU-hour, above 1,000,000; its spot price 20.9934 ÷ 8 = 2.624175 stays.
        let rows: Vec<(u32, &str, String)> = got
            .rows
            .iter()
            .map(|r| (r.line, r.billing.as_str(), r.rate_per_gpu_hour.to_string()))
            .collect();
        assert_eq!(
            rows,
            [
                (3, "spot", "2.624175".into()),
                (4, "on-demand", "4.096575".into()),
                (4, "spot", "0.651463".into()),
            ]
        );
        assert_eq!(got.skipped.len(), 1);
        assert_eq!(got.skipped[0].reason, SkipReason::RateOutOfRange);
        assert_eq!(got.skipped[0].lines, [2, 3]);
    }

    #[test]
    fn the_pairing_and_shape_tables_parse_and_cite_their_sources() {
        assert!(gcp_hosts().len() >= 15);
        for h in gcp_hosts() {
            assert!(
                gpu_for(&h.accelerator, "").is_some(),
                "{} is not a known accelerator",
                h.accelerator
            );
            assert!(
                h.source.contains("gcp_catalog.py"),
                "{}: cite SkyPilot's pairing",
                h.accelerator
            );
        }
        assert_eq!(host_types_for("h100", 8), Some(vec!["a3-highgpu-8g".to_owned()]));
        assert_eq!(host_types_for("L4", 1).map(|h| h.len()), Some(5));
        assert_eq!(host_types_for("T4", 1), None);
        assert_eq!(instance_shapes()["standard_nd96isr_h100_v5"].count, 8);
        assert!(instance_shapes().values().all(|s| s.source.len() > 20 && s.count > 0));
    }

    #[test]
    fn a_file_for_another_import_is_named() {
        let focus = b"BilledCost,BillingCurrency,ChargeCategory,ChargePeriodEnd,ChargePeriodStart,ResourceId,ServiceCategory\n1,USD,Usage,x,y,i-1,Compute\n";
        let e = parse_catalogue(focus, "AWS", day()).unwrap_err().0;
        assert!(e[0].message.contains("FOCUS billing export"), "{e:?}");
        assert!(e[0].message.contains("format=focus"), "{e:?}");
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
