//! `nvidia-smi -L`: `GPU <i>: <name> (UUID: GPU-…)` lines, MIG children indented below their GPU.
//!
//! `gpu.models` and `gpu.uuids` are per-GPU lists in listing order (one entry per physical GPU, MIG
//! devices are not GPUs); `gpu.mig_count` counts MIG devices; `gpu.mig_profiles` lists their
//! profiles. The count is what was LISTED (a paste can be cut by `head`).

use super::{text, ParseError, Parsed};

/// One pass over the listed lines, one arm per line form.
pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let mut l = Listing {
        // `collect_env`'s listing has no UUID on any line; in a listing that has them, a line
        // without one was cut short.
        uuids_listed: s.contains("(UUID:"),
        ..Listing::default()
    };

    for (i, raw) in s.lines().enumerate() {
        let ln = i + 1;
        let line = text::strip_ansi(raw);
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.contains("NVIDIA-SMI has failed") || t.starts_with("No devices were found") {
            return Err(ParseError::at(ln, format!("nvidia-smi reported an error: {t}")));
        }
        if t.starts_with("Unable to determine the device handle") {
            p.warn(format!(
                "line {ln}: a GPU the driver knows but cannot reach (fallen off the bus?), not counted: {t}"
            ));
            continue;
        }
        let entries = entries_of(t);
        if entries.len() > 1 {
            p.warn(format!(
                "line {ln}: {} GPU and MIG entries on one line (a paste that lost its line breaks): each read",
                entries.len()
            ));
        }
        for t in entries {
            if let Some(rest) = t.strip_prefix("GPU ") {
                l.gpu_line(&mut p, ln, t, rest);
            } else if let Some(rest) = t.strip_prefix("MIG ") {
                l.mig_line(&mut p, ln, t, rest);
            } else {
                warn_once(&mut l.first_bad, ln, t);
            }
        }
    }
    let Listing {
        models,
        uuids,
        mig_profiles,
        mig_gpus,
        first_bad,
        without_uuid,
        ..
    } = l;
    if without_uuid > 0 {
        p.warn(format!(
            "{without_uuid} GPU line(s) without `(UUID: …)` (as PyTorch's collect_env prints them): counted, no UUID"
        ));
    }

    if models.is_empty() {
        let (ln, t) = first_bad.unwrap_or((1, String::new()));
        return Err(ParseError::at(
            ln,
            format!("no `GPU <n>: <name> (UUID: …)` line found (first unrecognised line: {t:?})"),
        ));
    }
    if let Some((ln, t)) = first_bad {
        p.warn(format!("line {ln}: ignored unrecognised line: {t}"));
    }
    p.count("gpu.count", models.len() as f64);
    p.count("gpu.mig_count", mig_profiles.len() as f64);
    p.count("gpu.mig_enabled_gpus", mig_gpus as f64);
    p.list("gpu.models", models);
    p.list("gpu.uuids", uuids);
    p.list("gpu.mig_profiles", mig_profiles);
    Ok(p)
}

/// What the listing has shown so far.
#[derive(Default)]
struct Listing {
    models: Vec<String>,
    uuids: Vec<String>,
    mig_profiles: Vec<String>,
    /// GPUs with MIG devices under them.
    mig_gpus: usize,
    /// Whether the line before was a MIG device (of the same GPU).
    last_had_mig: bool,
    /// GPU lines listed without their UUID.
    without_uuid: usize,
    /// Whether any line of the input carries a UUID.
    uuids_listed: bool,
    first_bad: Option<(usize, String)>,
}

impl Listing {
    /// `GPU <i>: <name> (UUID: GPU-…)`, `rest` after `GPU `.
    fn gpu_line(&mut self, p: &mut Parsed, ln: usize, t: &str, rest: &str) {
        let Some((idx, after)) = rest.split_once(':') else {
            warn_once(&mut self.first_bad, ln, t);
            return;
        };
        if idx.trim().parse::<u32>().is_err() {
            warn_once(&mut self.first_bad, ln, t);
            return;
        }
        let after = after.trim();
        let Some(pos) = after.rfind("(UUID:") else {
            // PyTorch's and vLLM's `collect_env` print the listing with the UUIDs taken out: a GPU
            // named as a model is (`NVIDIA A100 80GB PCIe`), not a bus id (`nvidia-smi -q`'s
            // `GPU 00000000:17:00.0`).
            if self.uuids_listed || !after.starts_with(char::is_alphabetic) {
                p.warn(format!("line {ln}: GPU line without `(UUID: …)` (cut short?): {t}"));
                return;
            }
            self.without_uuid += 1;
            self.models.push(after.to_string());
            self.last_had_mig = false;
            return;
        };
        let name = after.get(..pos).unwrap_or_default().trim();
        let uuid = after
            .get(pos + "(UUID:".len()..)
            .unwrap_or_default()
            .trim()
            .trim_end_matches(')')
            .trim();
        if uuid.is_empty() || !t.ends_with(')') {
            p.warn(format!("line {ln}: GPU line is incomplete (cut short?): {t}"));
        }
        self.models.push(if name.is_empty() {
            "unknown".to_string()
        } else {
            name.to_string()
        });
        // Old cards print `(UUID: N/A)`: no UUID to keep.
        if !uuid.is_empty() && !uuid.eq_ignore_ascii_case("N/A") {
            self.uuids.push(uuid.to_string());
        }
        self.last_had_mig = false;
    }

    /// `MIG <profile> Device <n>: (UUID: MIG-…)`, `rest` after `MIG `.
    fn mig_line(&mut self, p: &mut Parsed, ln: usize, t: &str, rest: &str) {
        if self.models.is_empty() {
            p.warn(format!("line {ln}: MIG device before any GPU line"));
        }
        if !rest.contains("UUID:") {
            p.warn(format!("line {ln}: MIG line without UUID (cut short?): {t}"));
        }
        let profile = rest.split_whitespace().next().unwrap_or_default();
        self.mig_profiles.push(profile.to_string());
        if !self.last_had_mig {
            self.mig_gpus += 1;
            self.last_had_mig = true;
        }
    }
}

/// The entries of one line: `GPU 0: A (UUID: GPU-1) GPU 1: A (UUID: GPU-2)` (a listing pasted into
/// one line, or `echo $(nvidia-smi -L)`) is two. An entry ends at its UUID's `)`.
fn entries_of(t: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    // Whether the entry from `start` holds a UUID, read up to `scanned`: each byte is read once.
    let (mut scanned, mut has_uuid): (usize, bool) = (0, false);
    for (i, _) in t.match_indices(") ") {
        let next = &t[i + 2..];
        let starts_entry = next
            .strip_prefix("GPU ")
            .or_else(|| next.strip_prefix("MIG "))
            // The id's colon is near: never read the rest of a long line for it.
            .map(|r| &r[..char_boundary_below(r, 40)])
            .and_then(|r| r.split_once(':'))
            .is_some_and(|(head, _)| head.split_whitespace().last().is_some_and(|n| n.parse::<u32>().is_ok()));
        if !starts_entry {
            continue;
        }
        // `(UUID:` may straddle the last place read: read again from a few bytes before it.
        let from = char_boundary_below(t, scanned.saturating_sub(5).max(start));
        has_uuid |= t[from..i].contains("(UUID:");
        scanned = i;
        if has_uuid {
            out.push(t[start..=i].trim());
            start = i + 2;
            (scanned, has_uuid) = (start, false);
        }
    }
    out.push(t[start..].trim());
    out
}

/// The largest char boundary of `s` at or below `i`.
fn char_boundary_below(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn warn_once(first: &mut Option<(usize, String)>, ln: usize, t: &str) {
    if first.is_none() {
        *first = Some((ln, t.chars().take(120).collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA/open-gpu-kernel-modules#387 pasted four RTX 2080 Ti into one line of the issue form;
    /// `echo $(nvidia-smi -L)` in a shell log does the same.
    #[test]
    fn a_listing_pasted_into_one_line_counts_every_gpu() {
        let one_line = "GPU 0: NVIDIA GeForce RTX 2080 Ti (UUID: GPU-67a571b1-aaaa) GPU 1: NVIDIA GeForce RTX 2080 Ti \
                        (UUID: GPU-3e34e62f-bbbb) GPU 2: NVIDIA GeForce RTX 2080 Ti (UUID: GPU-cccc) GPU 3: NVIDIA \
                        GeForce RTX 2080 Ti (UUID: GPU-80be5c9a-eb7d-2388-ad7c-7d3ee8f87235)";
        let p = parse(one_line).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(4.0), "{:?}", p.warnings);
        assert!(p
            .warnings
            .iter()
            .any(|w| w.contains("4 GPU and MIG entries on one line")));
        let mig = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1) MIG 3g.20gb Device 0: (UUID: MIG-2) GPU 1: NVIDIA \
                   A100-SXM4-40GB (UUID: GPU-3)";
        let p = parse(mig).unwrap();
        assert_eq!(
            (p.get_num("gpu.count"), p.get_num("gpu.mig_count")),
            (Some(2.0), Some(1.0))
        );
    }

    /// A GPU the driver lists but cannot reach (NVIDIA/open-gpu-kernel-modules#387) is said so,
    /// and an old card's `(UUID: N/A)` keeps no UUID.
    #[test]
    fn a_gpu_the_driver_cannot_reach_is_said_and_no_uuid_is_na() {
        let s = "GPU 0: GeForce GTX 680 (UUID: N/A)\n\
                 Unable to determine the device handle for gpu 0000:0B:00.0: Unknown Error\n";
        let p = parse(s).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(1.0));
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("line 2: a GPU the driver knows but cannot reach")),
            "{:?}",
            p.warnings
        );
        match p.metrics.get("gpu.uuids") {
            Some(super::super::MetricValue::List(l)) => assert!(l.is_empty(), "{l:?}"),
            other => panic!("{other:?}"),
        }
    }
}
