//! NVIDIA dcgm-exporter `/metrics` (Prometheus text, `DCGM_FI_*` series with one `gpu` label per
//! GPU) → `gpu.*` figures: one scrape, or a before/after window like vLLM's.
//!
//! * `gpu.util_pct_avg` / `gpu.util_pct_max`: mean and max over GPUs of `DCGM_FI_DEV_GPU_UTIL` (%),
//!   else `DCGM_FI_PROF_GR_ENGINE_ACTIVE` × 100, chosen per GPU (a MIG-partitioned GPU takes its
//!   instances' engine-active ratio); `gpu.util_source` names the series used. Values no GPU can
//!   hold (utilisation outside 0–100 %, above 200 °C, 5 kW or 1 TiB) are left out with a warning.
//! * `gpu.memory_used_mib_max` (`DCGM_FI_DEV_FB_USED`, MiB; MIG instances of one GPU are summed),
//!   `gpu.power_w_max` (`DCGM_FI_DEV_POWER_USAGE`), `gpu.temp_c_max` (`DCGM_FI_DEV_GPU_TEMP`),
//!   `gpu.nvlink_bandwidth_gbps_max` (`DCGM_FI_PROF_NVLINK_TX_BYTES` + `_RX_BYTES`, bytes/s).
//! * `gpu.xid_errors`: distinct non-zero `DCGM_FI_DEV_XID_ERRORS` codes (the gauge holds a GPU's last
//!   XID), listed in `gpu.xid_codes`; in a window only codes that appeared since the `before` scrape.
//!   Where the exporter also exports `DCGM_EXP_XID_ERRORS_COUNT` (a gauge per GPU and `xid` label:
//!   the XIDs of its trailing window, five minutes by default), its codes with a count above 0 join
//!   them, so an earlier XID that a later one replaced in the last-code gauge still counts; in a
//!   window, a code whose count rose since `before`.
//! * `gpu.ecc_errors_uncorrected`: `DCGM_FI_DEV_ECC_DBE_AGG_TOTAL` summed, else the volatile
//!   `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL` with a warning (the exporter's default counter list exports
//!   neither; they are absent then).
//! * `gpu.models` (`modelName` label), `gpu.driver_version`, `dcgm_exporter.gpus`.
//! * Window: gauges as of the `after` scrape, counters (ECC totals, `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`
//!   → `gpu.energy_joules`) as the difference. A field that only grows (whatever its `# TYPE`) that
//!   went down means the exporter or driver restarted: warn and use the `after` values alone.

use super::prometheus::{self, Exposition, Sample};
use super::{ParseError, Parsed};
use std::collections::BTreeMap;

/// One value of a GPU's series: its MIG instance (`GPU_I_ID`), the instance's share of the GPU
/// (its profile's compute slices: `3g.40gb` is 3; 1 without a profile) and the value.
type InstanceValue = (Option<String>, f64, f64);

/// The values of one GPU's series of one name (several for MIG instances).
type GpuValues = Vec<InstanceValue>;

/// DCGM's blank value of a 32-bit field (`DCGM_INT32_BLANK`, 0x7ffffff0): the field was not read.
const DCGM_INT32_BLANK: f64 = 2_147_483_632.0;

/// The compute slices of a MIG profile (`GPU_I_PROFILE="3g.40gb"` → 3), the weight of its
/// instance in the GPU's mean: a 3g instance busy is more of the GPU than a 1g one.
fn slices(profile: Option<&str>) -> f64 {
    profile
        .and_then(|p| p.split_once('g'))
        .and_then(|(n, _)| n.parse::<u8>().ok())
        .filter(|n| *n > 0)
        .map_or(1.0, f64::from)
}

/// Per-GPU values of one scrape: series name → GPU key → values.
#[derive(Default)]
struct Scrape<'a> {
    series: BTreeMap<&'a str, BTreeMap<String, GpuValues>>,
    models: Vec<String>,
    /// The models listed so far, for a lookup that stays linear on hostile input.
    model_set: std::collections::HashSet<&'a str>,
    driver: Option<String>,
    counters: Vec<&'a str>,
    /// `DCGM_EXP_XID_ERRORS_COUNT`: GPU key → XID code → records in the exporter's trailing window.
    xid_window: BTreeMap<String, BTreeMap<&'a str, f64>>,
}

/// dcgm-exporter's count of XID records per GPU and code in its trailing window (not a `DCGM_FI_`
/// field: the exporter computes it). A gauge, though its name ends in `_COUNT`: it falls as records
/// leave the window, which is no restart.
const XID_WINDOW_COUNT: &str = "DCGM_EXP_XID_ERRORS_COUNT";

/// The GPU a sample is of, as warnings name it: its index with its UUID (`0 (GPU-…)`), which no
/// other machine's GPU has; without a UUID the index on its host. Scrapes of several machines put
/// one after another, or Prometheus' `/federate`, carry GPU 0 once per host; the host label alone
/// is not the GPU's (in Kubernetes it is the exporter pod's name, new after a restart).
fn gpu_key(s: &Sample<'_>) -> String {
    let gpu = s.label("gpu").or_else(|| s.label("device"));
    match (
        gpu,
        s.label("UUID"),
        s.label("Hostname").or_else(|| s.label("hostname")),
    ) {
        (Some(gpu), Some(uuid), _) => format!("{gpu} ({uuid})"),
        (None, Some(uuid), _) => uuid.to_owned(),
        (Some(gpu), None, Some(host)) => format!("{gpu} on {host}"),
        (gpu, None, _) => gpu.unwrap_or_default().to_owned(),
    }
}

/// A sample of another entity than a GPU (dcgm-exporter 4 exports Grace CPUs, their cores and
/// NVSwitches beside the GPUs): no GPU of the scrape.
fn of_another_entity(s: &Sample<'_>) -> bool {
    s.label("gpu").is_none()
        && s.label("UUID").is_none()
        && ["cpu", "cpucore", "nvswitch"].iter().any(|l| s.label(l).is_some())
}

/// Fields that only grow while the exporter and driver run, whatever `# TYPE` says: one that went
/// down between the scrapes is a restart. dcgm-exporter 2.2–3.3's default list types rates as
/// counters (`DCGM_FI_DEV_PCIE_TX_THROUGHPUT`, `DCGM_FI_PROF_PCIE_TX_BYTES`: NVIDIA/dcgm-exporter#87),
/// and a federated scrape types everything `untyped`, so the type alone proves nothing.
fn only_grows(name: &str) -> bool {
    // `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL` is a rate whatever its name says (NVIDIA/dcgm-exporter#417).
    let rate = name.contains("BANDWIDTH") || name.contains("THROUGHPUT");
    !rate
        && (name.ends_with("_TOTAL")
            || name.ends_with("_COUNT")
            || name.ends_with("_COUNTER")
            || name.ends_with("_REMAPPED_ROWS")
            || name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
}

fn collect<'a>(e: &'a Exposition<'a>, p: &mut Parsed) -> Scrape<'a> {
    let mut out = Scrape::default();
    for s in &e.samples {
        let window_count = s.name == XID_WINDOW_COUNT;
        if !s.name.starts_with("DCGM_FI_") && !window_count {
            continue;
        }
        if !s.value.is_finite() {
            p.warn(format!("line {}: {} is {}; ignored", s.line, s.name, s.value));
            continue;
        }
        if of_another_entity(s) {
            continue;
        }
        if window_count {
            // Each GPU also has one 0-valued series with no code (or `xid="0"`): read, no XID.
            let counts = out.xid_window.entry(gpu_key(s)).or_default();
            if let Some(code) = s.label("xid").filter(|c| !c.is_empty() && *c != "0") {
                let n = counts.entry(code).or_default();
                *n = n.max(s.value);
            }
            continue;
        }
        if let Some(m) = s.label("modelName") {
            if out.model_set.insert(m) {
                out.models.push(m.to_owned());
            }
        }
        if out.driver.is_none() {
            out.driver = s.label("DCGM_FI_DRIVER_VERSION").map(str::to_owned);
        }
        if only_grows(s.name) && !out.counters.contains(&s.name) {
            out.counters.push(s.name);
        }
        out.series
            .entry(s.name)
            .or_default()
            .entry(gpu_key(s))
            .or_default()
            .push((
                s.label("GPU_I_ID").map(str::to_owned),
                slices(s.label("GPU_I_PROFILE")),
                s.value,
            ));
    }
    out
}

/// One value per GPU: `sum_instances` adds MIG instances (memory), otherwise the series of one GPU
/// are averaged (utilisation of its instances) or their maximum taken (`max`).
fn per_gpu(scrape: &Scrape<'_>, name: &str, fold: Fold) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (gpu, vals) in scrape.series.get(name).into_iter().flatten() {
        if vals.is_empty() {
            continue;
        }
        let v = match fold {
            Fold::Max => vals.iter().map(|(_, _, v)| *v).fold(f64::NEG_INFINITY, f64::max),
            Fold::Mean => {
                let weight: f64 = vals.iter().map(|(_, w, _)| *w).sum();
                vals.iter().map(|(_, w, v)| w * v).sum::<f64>() / weight
            }
            Fold::SumInstances => {
                // The device-level series has no GPU_I_ID; with instances present, add theirs.
                let inst: Vec<f64> = vals
                    .iter()
                    .filter(|(i, _, _)| i.is_some())
                    .map(|(_, _, v)| *v)
                    .collect();
                if inst.is_empty() {
                    vals.iter().map(|(_, _, v)| *v).fold(f64::NEG_INFINITY, f64::max)
                } else {
                    inst.iter().sum()
                }
            }
        };
        out.insert(gpu.clone(), v);
    }
    out
}

#[derive(Clone, Copy)]
enum Fold {
    Max,
    Mean,
    SumInstances,
}

fn max_of(m: &BTreeMap<String, f64>) -> Option<f64> {
    m.values().copied().reduce(f64::max)
}

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let e = prometheus::parse(s)?;
    let mut p = Parsed {
        tool: Some("dcgm-exporter".into()),
        ..Default::default()
    };
    let after = collect(&e, &mut p);
    figures(&mut p, &after, None);
    for w in e.warnings {
        p.warn(w);
    }
    Ok(p)
}

pub(crate) fn parse_window(before: &str, after: &str) -> Result<Parsed, ParseError> {
    let a = prometheus::parse(after)?;
    let mut p = Parsed {
        tool: Some("dcgm-exporter".into()),
        ..Default::default()
    };
    let after_scrape = collect(&a, &mut p);
    match prometheus::parse(before) {
        Ok(b) => {
            let mut scratch = Parsed::default();
            let before_scrape = collect(&b, &mut scratch);
            figures(&mut p, &after_scrape, Some(&before_scrape));
        }
        Err(err) => {
            p.warn(format!(
                "`before` scrape unreadable ({err}); counters are cumulative since the exporter started"
            ));
            figures(&mut p, &after_scrape, None);
        }
    }
    for w in a.warnings {
        p.warn(w);
    }
    Ok(p)
}

/// One figure per metric of the scrape, each a few lines.
fn figures(p: &mut Parsed, a: &Scrape<'_>, before: Option<&Scrape<'_>>) {
    if a.series.is_empty() {
        p.warn("no DCGM_FI_ series in this scrape (is this a dcgm-exporter /metrics endpoint?)");
        return;
    }
    let gpus: Vec<&String> = {
        let mut g: Vec<&String> = a.series.values().flat_map(|m| m.keys()).collect();
        g.sort();
        g.dedup();
        g
    };
    p.count("dcgm_exporter.gpus", gpus.len() as f64);
    if !a.models.is_empty() {
        p.list("gpu.models", a.models.clone());
    }
    if let Some(d) = &a.driver {
        p.text("gpu.driver_version", d.clone());
    }

    utilisation(p, a);
    // The largest value a GPU can hold, far above any made: above it is one of DCGM's blank
    // sentinels (9,223,372,036,854,775,807 and the like) or a corrupt sample, not a reading.
    let gauges: [(&str, &str, Fold, f64, &str); 3] = [
        (
            "DCGM_FI_DEV_FB_USED",
            "gpu.memory_used_mib_max",
            Fold::SumInstances,
            1_048_576.0,
            "MiB",
        ),
        ("DCGM_FI_DEV_POWER_USAGE", "gpu.power_w_max", Fold::Max, 5_000.0, "W"),
        ("DCGM_FI_DEV_GPU_TEMP", "gpu.temp_c_max", Fold::Max, 200.0, "°C"),
    ];
    for (series, key, fold, most, unit) in gauges {
        let mut values = per_gpu(a, series, fold);
        values.retain(|gpu, v| {
            let possible = *v <= most;
            if !possible {
                p.warn(format!(
                    "GPU {gpu}: {series} {v} {unit} is above {most} {unit}; left out"
                ));
            }
            possible
        });
        if let Some(m) = max_of(&values) {
            p.nonneg(key, m);
        }
    }
    let tx = per_gpu(a, "DCGM_FI_PROF_NVLINK_TX_BYTES", Fold::Max);
    let rx = per_gpu(a, "DCGM_FI_PROF_NVLINK_RX_BYTES", Fold::Max);
    if !tx.is_empty() || !rx.is_empty() {
        let both = gpus
            .iter()
            .map(|g| tx.get(*g).copied().unwrap_or(0.0) + rx.get(*g).copied().unwrap_or(0.0))
            .fold(0.0, f64::max);
        p.nonneg("gpu.nvlink_bandwidth_gbps_max", both / 1e9);
    }

    xid_codes(p, a, before);

    let windowed = counters(p, a, before);
    if before.is_some() {
        p.boolean("dcgm_exporter.window", windowed);
    }
}

const GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
const GR_ENGINE_ACTIVE: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";

/// Utilisation per GPU: the classic gauge, else the profiling engine-active ratio, chosen GPU by
/// GPU: a MIG-partitioned GPU has no (or a zero) `DCGM_FI_DEV_GPU_UTIL` and only its instances'
/// engine-active series, so it takes those (their mean) while the other GPUs keep the gauge.
/// A value outside 0–100 % (the exporter has sent 808,334,905 and 4,294,967,295) is left out with
/// a warning.
fn utilisation(p: &mut Parsed, a: &Scrape<'_>) {
    let gauge = per_gpu(a, GPU_UTIL, Fold::Mean);
    let engine_active = per_gpu(a, GR_ENGINE_ACTIVE, Fold::Mean);
    let partitioned = |gpu: &str| {
        a.series
            .get(GR_ENGINE_ACTIVE)
            .and_then(|m| m.get(gpu))
            .is_some_and(|vals| vals.iter().any(|(instance, _, _)| instance.is_some()))
    };
    let mut util: BTreeMap<&str, f64> = BTreeMap::new();
    let mut sources: Vec<&str> = Vec::new();
    let gpus = gauge.keys().chain(engine_active.keys());
    for gpu in gpus {
        if util.contains_key(gpu.as_str()) {
            continue;
        }
        let (value, source) = match (gauge.get(gpu), engine_active.get(gpu)) {
            (Some(_), Some(ratio)) if partitioned(gpu) => (ratio * 100.0, GR_ENGINE_ACTIVE),
            (Some(pct), _) => (*pct, GPU_UTIL),
            (None, Some(ratio)) => (ratio * 100.0, GR_ENGINE_ACTIVE),
            (None, None) => continue,
        };
        if !(0.0..=100.0).contains(&value) {
            p.warn(format!(
                "GPU {gpu}: utilisation {value} % from {source} is outside 0–100 %; left out"
            ));
            continue;
        }
        util.insert(gpu, value);
        if !sources.contains(&source) {
            sources.push(source);
        }
    }
    if util.is_empty() {
        if gauge.is_empty() && engine_active.is_empty() {
            p.warn("no utilisation series (DCGM_FI_DEV_GPU_UTIL or DCGM_FI_PROF_GR_ENGINE_ACTIVE)");
        }
        return;
    }
    let avg = util.values().sum::<f64>() / util.len() as f64;
    p.nonneg("gpu.util_pct_avg", avg);
    if let Some(m) = util.values().copied().reduce(f64::max) {
        p.nonneg("gpu.util_pct_max", m);
    }
    sources.sort();
    p.text("gpu.util_source", sources.join(", "));
}

/// XIDs: the last code per GPU, with the codes of the exporter's windowed count where it has one;
/// in a window, only codes that are new since `before` (a last code that changed, a count that rose).
fn xid_codes(p: &mut Parsed, a: &Scrape<'_>, before: Option<&Scrape<'_>>) {
    let xid_after = per_gpu(a, "DCGM_FI_DEV_XID_ERRORS", Fold::Max);
    if xid_after.is_empty() && a.xid_window.is_empty() {
        return;
    }
    let xid_before = before.map(|b| per_gpu(b, "DCGM_FI_DEV_XID_ERRORS", Fold::Max));
    let mut codes: Vec<String> = Vec::new();
    let mut add = |c: String| {
        if !codes.contains(&c) {
            codes.push(c);
        }
    };
    for (gpu, code) in &xid_after {
        let old = xid_before.as_ref().and_then(|b| b.get(gpu)).copied();
        if *code != 0.0 && old != Some(*code) {
            add(format!("{code}"));
        }
    }
    for (gpu, counts) in &a.xid_window {
        for (code, n) in counts {
            let then = before
                .and_then(|b| b.xid_window.get(gpu))
                .and_then(|c| c.get(code))
                .copied()
                .unwrap_or(0.0);
            if *n > 0.0 && *n > then {
                // The label is the code as the driver numbers it; a number reads as the gauge's.
                add(code
                    .parse::<u32>()
                    .map_or_else(|_| (*code).to_owned(), |c| c.to_string()));
            }
        }
    }
    p.count("gpu.xid_errors", codes.len() as f64);
    p.list("gpu.xid_codes", codes);
}

/// Counters (ECC, remapped rows, energy): in a window, the difference; a counter that went down
/// means a restart. Whether the figures are over a window (both scrapes read, no restart).
fn counters(p: &mut Parsed, a: &Scrape<'_>, before: Option<&Scrape<'_>>) -> bool {
    let restarted = before.and_then(|b| {
        a.counters.iter().find(|c| {
            let now = per_gpu(a, c, Fold::Max);
            let then = per_gpu(b, c, Fold::Max);
            now.iter().any(|(g, v)| then.get(g).is_some_and(|t| v < t))
        })
    });
    if let Some(c) = restarted {
        p.warn(format!(
            "counter {c} went down between the scrapes: the exporter or driver restarted; counters are the `after` values alone"
        ));
    }
    let window = before.filter(|_| restarted.is_none());
    let mut blanks: Vec<String> = Vec::new();
    let mut counter = |series: &str| -> Option<f64> {
        let now = per_gpu(a, series, Fold::Max);
        if now.is_empty() {
            return None;
        }
        // A count at DCGM's 32-bit blank (2,147,483,632) or above is no reading: the others'
        // sum would read as the whole box's.
        if series != "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" {
            if let Some((gpu, v)) = now.iter().find(|(_, v)| **v >= DCGM_INT32_BLANK) {
                blanks.push(format!("GPU {gpu}: {series} is {v}, one of DCGM's blank values"));
                return Some(f64::NAN);
            }
        }
        let then = window.map(|b| per_gpu(b, series, Fold::Max));
        Some(
            now.iter()
                .map(|(g, v)| v - then.as_ref().and_then(|t| t.get(g)).copied().unwrap_or(0.0))
                .sum(),
        )
    };
    let ecc = counter("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL");
    let ecc_volatile = ecc
        .is_none()
        .then(|| counter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"))
        .flatten();
    let remapped = counter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS");
    let energy = window.and_then(|_| counter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"));
    for b in blanks {
        p.warn(format!("{b}: the figure it goes into is not given"));
    }
    // A blank count (NaN here) was warned about above and gives no figure.
    let read = |n: &f64| !n.is_nan();
    if let Some(n) = ecc {
        if read(&n) {
            p.count("gpu.ecc_errors_uncorrected", n);
        }
    } else if let Some(n) = ecc_volatile.filter(read) {
        p.count("gpu.ecc_errors_uncorrected", n);
        p.warn(
            "gpu.ecc_errors_uncorrected is from the volatile counter DCGM_FI_DEV_ECC_DBE_VOL_TOTAL \
             (since the last driver load): the aggregate one is not exported",
        );
    } else if ecc_volatile.is_none() {
        // dcgm-exporter's default counter list leaves the ECC fields out; say so rather than
        // let a missing figure read as "no errors".
        p.warn(
            "no ECC counters exported (DCGM_FI_DEV_ECC_DBE_AGG_TOTAL / _VOL_TOTAL): \
             gpu.ecc_errors_uncorrected unknown; add them to the exporter's counter list",
        );
    }
    if let Some(n) = remapped.filter(read) {
        p.count("gpu.uncorrectable_remapped_rows", n);
    }
    if let Some(mj) = energy {
        p.nonneg("gpu.energy_joules", mj / 1000.0);
    }
    window.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Labels in the shape dcgm-exporter 3.x writes them on an A800 node with GPU 0 partitioned.
    fn sample(series: &str, gpu: u8, instance: Option<(&str, u8)>, value: &str) -> String {
        let mig = instance.map_or(String::new(), |(profile, id)| {
            format!(",GPU_I_PROFILE=\"{profile}\",GPU_I_ID=\"{id}\"")
        });
        format!(
            "{series}{{gpu=\"{gpu}\",UUID=\"GPU-a800-{gpu}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA A800-SXM4-80GB\"{mig},Hostname=\"node-35\"}} {value}\n"
        )
    }

    #[test]
    fn a_partitioned_gpu_takes_its_instances_engine_activity_and_keeps_its_place() {
        let mut text = String::from("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n");
        text += &sample("DCGM_FI_DEV_GPU_UTIL", 1, None, "80");
        text += "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n";
        text += &sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, Some(("2g.20gb", 3)), "0.950000");
        text += &sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, Some(("2g.20gb", 5)), "0.500000");
        text += &sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1, None, "0.790000");
        let p = parse(&text).unwrap();
        // GPU 0: (0.95 + 0.50) ÷ 2 = 72.5 %; GPU 1: its gauge, 80 %.
        assert_eq!(p.get_num("gpu.util_pct_max"), Some(80.0));
        assert_eq!(p.get_num("gpu.util_pct_avg"), Some(76.25));
        assert_eq!(
            p.metrics.get("gpu.util_source"),
            Some(&super::super::MetricValue::Text(
                "DCGM_FI_DEV_GPU_UTIL, DCGM_FI_PROF_GR_ENGINE_ACTIVE".into()
            ))
        );
        // A MIG GPU whose classic gauge reads 0 (NVIDIA/dcgm-exporter#216) still takes its
        // instances' activity.
        let zero = text.clone() + &sample("DCGM_FI_DEV_GPU_UTIL", 0, None, "0");
        assert_eq!(parse(&zero).unwrap().get_num("gpu.util_pct_avg"), Some(76.25));
    }

    #[test]
    fn values_no_gpu_can_hold_are_left_out_with_a_warning() {
        // NVIDIA/dcgm-exporter#418 (808,334,905 % on an H100) and a blank sentinel temperature.
        let mut text = String::new();
        text += &sample("DCGM_FI_DEV_GPU_UTIL", 0, None, "808334905");
        text += &sample("DCGM_FI_DEV_GPU_UTIL", 1, None, "50");
        text += &sample("DCGM_FI_DEV_GPU_TEMP", 0, None, "9223372036854775807");
        text += &sample("DCGM_FI_DEV_GPU_TEMP", 1, None, "61");
        let p = parse(&text).unwrap();
        assert_eq!(p.get_num("gpu.util_pct_max"), Some(50.0));
        assert_eq!(p.get_num("gpu.util_pct_avg"), Some(50.0));
        assert_eq!(p.get_num("gpu.temp_c_max"), Some(61.0));
        let warned = |what: &str| p.warnings.iter().any(|w| w.contains(what));
        assert!(
            warned("GPU 0 (GPU-a800-0): utilisation 808334905 %"),
            "{:?}",
            p.warnings
        );
        assert!(warned("DCGM_FI_DEV_GPU_TEMP"), "{:?}", p.warnings);
    }

    /// dcgm-exporter 3.3's default counter list types PCIe rates as counters: a rate that fell
    /// between the scrapes is no restart, and the window stands.
    #[test]
    fn a_rate_typed_as_a_counter_that_falls_is_no_restart() {
        let scrape = |energy: &str, pcie: &str| {
            format!(
                "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
                 DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"}} {energy}\n\
                 # TYPE DCGM_FI_DEV_PCIE_TX_THROUGHPUT counter\n\
                 DCGM_FI_DEV_PCIE_TX_THROUGHPUT{{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"}} {pcie}\n\
                 DCGM_FI_DEV_GPU_UTIL{{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"}} 40\n"
            )
        };
        let p = parse_window(&scrape("1000000", "5120"), &scrape("5000000", "4096")).unwrap();
        assert!(!p.warnings.iter().any(|w| w.contains("restarted")), "{:?}", p.warnings);
        assert_eq!(p.get_num("gpu.energy_joules"), Some(4000.0));
        // The NVLink "total" is a rate too; and the exporter pod's new name (its Hostname label
        // in Kubernetes) is the same GPU: the window stands.
        let nvlink = |mj: &str, bw: &str, host: &str| {
            format!(
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"{host}\"}} {mj}\n\
                 # TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter\n\
                 DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"{host}\"}} {bw}\n"
            )
        };
        let p = parse_window(
            &nvlink("1000000", "200000", "dcgm-exporter-abc"),
            &nvlink("3000000", "100", "dcgm-exporter-xyz"),
        )
        .unwrap();
        assert!(!p.warnings.iter().any(|w| w.contains("restarted")), "{:?}", p.warnings);
        assert_eq!(p.get_num("gpu.energy_joules"), Some(2000.0));
        // Energy that went down is a restart.
        let p = parse_window(&scrape("1000000", "5120"), &scrape("1000", "4096")).unwrap();
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION went down")),
            "{:?}",
            p.warnings
        );
    }

    /// Two machines' scrapes put together carry GPU 0 twice; a Grace CPU's series is no GPU.
    #[test]
    fn gpus_of_two_hosts_stay_apart_and_a_cpu_is_no_gpu() {
        let text = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-aaa\",Hostname=\"node-a\"} 100\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-bbb\",Hostname=\"node-b\"} 0\n\
                    DCGM_FI_DEV_CPU_UTIL_TOTAL{cpu=\"0\",hostname=\"node-a\"} 0.5\n";
        let p = parse(text).unwrap();
        assert_eq!(p.get_num("dcgm_exporter.gpus"), Some(2.0), "{:?}", p.warnings);
        assert_eq!(p.get_num("gpu.util_pct_max"), Some(100.0));
        assert_eq!(p.get_num("gpu.util_pct_avg"), Some(50.0));
    }

    /// A MIG GPU's utilisation weighs each instance by its compute slices: a 3g instance busy and
    /// four 1g instances idle are 3 of 7 slices busy, not one instance of five.
    #[test]
    fn a_mig_gpus_utilisation_weighs_its_instances_by_their_slices() {
        let mut text = sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, Some(("3g.40gb", 1)), "1");
        for id in 2..6 {
            text += &sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0, Some(("1g.10gb", id)), "0");
        }
        let p = parse(&text).unwrap();
        let util = p.get_num("gpu.util_pct_avg").unwrap();
        assert!((util - 300.0 / 7.0).abs() < 0.01, "{util}");
    }

    /// An ECC count at DCGM's 32-bit blank is no reading: the box's count is not given.
    #[test]
    fn an_ecc_count_at_dcgms_blank_gives_no_count() {
        let mut text = sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, None, "2147483632");
        text += &sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, None, "0");
        let p = parse(&text).unwrap();
        assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), None);
        assert!(
            p.warnings.iter().any(|w| w.contains("one of DCGM's blank values")),
            "{:?}",
            p.warnings
        );
        assert!(
            !p.warnings
                .iter()
                .any(|w| w.contains("not finite") || w.contains("no ECC counters")),
            "{:?}",
            p.warnings
        );
    }

    /// dcgm-exporter's XID collector (`--xid-count-window-size`): one series per GPU and code, with
    /// the exporter's window in a label, and a 0-valued series without a code for a quiet GPU.
    fn xid_window(gpu: u8, code: Option<u32>, count: u32) -> String {
        let xid = code.map_or(String::new(), |c| format!(",xid=\"{c}\""));
        format!(
            "DCGM_EXP_XID_ERRORS_COUNT{{gpu=\"{gpu}\",UUID=\"GPU-a800-{gpu}\",device=\"nvidia{gpu}\",modelName=\"NVIDIA A800-SXM4-80GB\",Hostname=\"node-35\",window_size_in_ms=\"300000\"{xid}}} {count}\n"
        )
    }

    #[test]
    fn the_exporters_windowed_xid_count_gives_codes_the_last_code_gauge_lost() {
        // GPU 0 had XID 79 and then 13: the last-code gauge says 13 alone.
        let mut text = String::from("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n");
        text += &sample("DCGM_FI_DEV_XID_ERRORS", 0, None, "13");
        text += &sample("DCGM_FI_DEV_XID_ERRORS", 1, None, "0");
        text += "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge\n";
        text += &xid_window(0, Some(79), 1);
        text += &xid_window(0, Some(13), 2);
        text += &xid_window(1, None, 0);
        let p = parse(&text).unwrap();
        assert_eq!(p.get_num("gpu.xid_errors"), Some(2.0));
        assert_eq!(
            p.metrics.get("gpu.xid_codes"),
            Some(&super::super::MetricValue::List(vec!["13".into(), "79".into()]))
        );
        // Its count falling as records leave the window is no restart of the exporter.
        assert!(!p.warnings.iter().any(|w| w.contains("restarted")), "{:?}", p.warnings);

        // Without the last-code gauge, the windowed count alone gives the figure; a quiet box 0.
        let alone = xid_window(2, Some(48), 1) + &sample("DCGM_FI_DEV_GPU_UTIL", 2, None, "10");
        assert_eq!(parse(&alone).unwrap().get_num("gpu.xid_errors"), Some(1.0));
        let quiet = xid_window(0, None, 0) + &sample("DCGM_FI_DEV_GPU_UTIL", 0, None, "10");
        assert_eq!(parse(&quiet).unwrap().get_num("gpu.xid_errors"), Some(0.0));
    }

    #[test]
    fn in_a_window_an_xid_counts_only_where_its_windowed_count_rose() {
        let util = sample("DCGM_FI_DEV_GPU_UTIL", 0, None, "90");
        let before = util.clone() + &xid_window(0, Some(31), 2);
        // 31 is still in the exporter's window with fewer records: nothing new; 79 is new.
        let after = util + &xid_window(0, Some(31), 1) + &xid_window(0, Some(79), 1);
        let p = parse_window(&before, &after).unwrap();
        assert_eq!(p.get_num("gpu.xid_errors"), Some(1.0));
        assert_eq!(
            p.metrics.get("gpu.xid_codes"),
            Some(&super::super::MetricValue::List(vec!["79".into()]))
        );
        assert!(!p.warnings.iter().any(|w| w.contains("restarted")), "{:?}", p.warnings);
    }
}
