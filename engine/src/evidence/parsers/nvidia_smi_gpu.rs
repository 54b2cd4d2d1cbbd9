//! One GPU as `nvidia-smi` reports it, whatever the output format, and the box-level keys folded
//! from all of them. Shared by the XML / CSV reader (`nvidia_smi_query`) and the text readers
//! (`nvidia_smi_text`).

use super::Parsed;

#[derive(Default)]
pub(crate) struct Gpu {
    pub(crate) name: Option<String>,
    pub(crate) uuid: Option<String>,
    pub(crate) mem_total: Option<f64>,
    pub(crate) mem_used: Option<f64>,
    pub(crate) ecc_agg: Option<f64>,
    pub(crate) ecc_vol: Option<f64>,
    pub(crate) mig_devices: usize,
    pub(crate) mig_mode: Option<String>,
    /// `memory.reserved` + `memory.free` (CSV), to derive a total when it was not queried
    pub(crate) mem_other: Option<f64>,
    /// The driver printed an error in place of a figure (`ERR!`, `Unknown Error`): the GPU has
    /// fallen off the bus or needs a reset, and its counters cannot be read.
    pub(crate) error: bool,
    /// The table's ECC cell said `On` (MIG mode): its count is the sum of its MIG devices' (`None`
    /// inside while none was read).
    pub(crate) ecc_in_mig_devices: Option<Option<f64>>,
}

/// A cell the driver filled with an error instead of a figure: the table's `ERR!`, `-q`'s and
/// the CSV's `Unknown Error` / `[Unknown Error]`, `GPU requires reset`.
pub(crate) fn is_gpu_error(v: &str) -> bool {
    let v = v.trim().trim_start_matches('[').trim_end_matches(']');
    v == "ERR!" || v.starts_with("Unknown Error") || v.starts_with("GPU requires reset") || v.starts_with("GPU is lost")
}

/// A later sample `g` of the GPU `was` (a log of `-l`, or the command run in a loop): the largest
/// memory used, the largest of each ECC counter — they only grow, and a later `[N/A]` is no reset —
/// and the newest of every other figure.
pub(crate) fn merge_sample(was: &mut Gpu, g: Gpu) {
    let larger = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let (mem_used, ecc_agg, ecc_vol) = (
        larger(was.mem_used, g.mem_used),
        larger(was.ecc_agg, g.ecc_agg),
        larger(was.ecc_vol, g.ecc_vol),
    );
    let error = was.error || g.error;
    *was = Gpu {
        name: g.name.or(was.name.take()),
        uuid: g.uuid.or(was.uuid.take()),
        mem_total: g.mem_total.or(was.mem_total),
        mem_used,
        ecc_agg,
        ecc_vol,
        error,
        ..g
    };
}

/// GPUs read in several samples, keyed so that a later sample's GPU meets its earlier one: one
/// GPU each, merged (`merge_sample`), and how many readings were further samples.
pub(crate) fn fold_samples(read: Vec<(String, Gpu)>) -> (Vec<Gpu>, usize) {
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut gpus: Vec<Gpu> = Vec::new();
    let mut repeated = 0;
    for (key, g) in read {
        match at.get(&key) {
            Some(&i) => {
                repeated += 1;
                merge_sample(&mut gpus[i], g);
            }
            None => {
                at.insert(key, gpus.len());
                gpus.push(g);
            }
        }
    }
    (gpus, repeated)
}

/// The warning for a log of several samples.
pub(crate) fn samples_warning(repeated: usize) -> String {
    format!(
        "{repeated} readings were further samples of the same GPUs (a log of repeated runs): each GPU counted \
         once, its largest memory used and its largest ECC counts kept"
    )
}

pub(crate) fn is_na(v: &str) -> bool {
    let v = v.trim().trim_start_matches('[').trim_end_matches(']');
    v.is_empty()
        || v.eq_ignore_ascii_case("N/A")
        || v.starts_with("Not Supported")
        || v.starts_with("Requested functionality")
}

pub(crate) fn finish(p: &mut Parsed, gpus: &[Gpu]) {
    p.count("gpu.count", gpus.len() as f64);
    p.list(
        "gpu.models",
        gpus.iter()
            .map(|g| g.name.clone().unwrap_or_else(|| "unknown".into()))
            .collect(),
    );
    let uuids: Vec<String> = gpus.iter().filter_map(|g| g.uuid.clone()).collect();
    if !uuids.is_empty() {
        p.list("gpu.uuids", uuids);
    }
    let totals: Vec<f64> = gpus.iter().filter_map(|g| g.mem_total).collect();
    if let Some(min) = totals.iter().copied().reduce(f64::min) {
        let max = totals.iter().copied().fold(min, f64::max);
        if max != min {
            p.warn(format!(
                "GPUs differ in memory: {min} … {max} MiB; reporting the smallest"
            ));
        }
        p.count("gpu.memory_total_mib", min);
    } else {
        p.warn("no memory.total / fb_memory_usage/total value");
    }
    if let Some(max) = gpus.iter().filter_map(|g| g.mem_used).reduce(f64::max) {
        p.count("gpu.memory_used_mib_max", max);
    }
    let failed: Vec<String> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.error)
        .map(|(i, _)| i.to_string())
        .collect();
    if !failed.is_empty() {
        // A sum of the GPUs that answered would read as "no errors" for a card in error.
        p.warn(format!(
            "GPU {} reported an error (ERR! / Unknown Error) in place of its figures: fallen off the bus or in \
             need of a reset; its ECC counters cannot be read, so gpu.ecc_errors_uncorrected is not given",
            failed.join(", ")
        ));
        return;
    }
    let unread: Vec<String> = gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.ecc_in_mig_devices == Some(None))
        .map(|(i, _)| i.to_string())
        .collect();
    if !unread.is_empty() {
        // The others' sum would read as the whole box's.
        p.warn(format!(
            "GPU {} is in MIG mode: its uncorrectable ECC count is in the MIG devices table, which is not in the \
             input, so gpu.ecc_errors_uncorrected is not given (nvidia-smi -q or --query-gpu gives it whole)",
            unread.join(", ")
        ));
        return;
    }
    let agg: Vec<f64> = gpus.iter().filter_map(|g| g.ecc_agg).collect();
    let vol: Vec<f64> = gpus.iter().filter_map(|g| g.ecc_vol).collect();
    if !agg.is_empty() {
        p.count("gpu.ecc_errors_uncorrected", agg.iter().sum());
    } else if !vol.is_empty() {
        // Volatile counters reset with the driver: fewer errors than the card has had, never more.
        p.count("gpu.ecc_errors_uncorrected", vol.iter().sum());
        p.warn(
            "gpu.ecc_errors_uncorrected is from the volatile uncorrectable ECC counters (since the last \
             driver load): the aggregate counters were not in the input",
        );
    }
    if !vol.is_empty() {
        p.count("gpu.ecc_errors_uncorrected_volatile", vol.iter().sum());
    }
    if agg.is_empty() && vol.is_empty() {
        p.warn("uncorrectable ECC counters not reported (N/A: ECC disabled or unsupported, or not queried)");
    }
}
