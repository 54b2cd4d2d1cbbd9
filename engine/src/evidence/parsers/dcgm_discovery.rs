//! `dcgmi discovery -l`: `<N> <entity>s found.` sections with box tables (or their cells a line
//! each, `Name: …`, as some issue reports paste them). `dcgm.gpu_count` is the
//! count line's N; `gpu.models` / `gpu.uuids` are per-GPU lists (`<<<NULL>>>` names become
//! `unknown`, a DCGM 3.1.7 bug with MIG). `dcgm.nvswitch_count` when listed.

use super::{ParseError, Parsed};

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("dcgmi".into()),
        ..Default::default()
    };
    let mut section = String::new();
    let mut gpu_count: Option<f64> = None;
    let mut models: Vec<String> = Vec::new();
    let mut uuids: Vec<String> = Vec::new();
    let mut buses: Vec<String> = Vec::new();
    let mut first_count_line = None;
    for (i, l) in s.lines().enumerate() {
        let ln = i + 1;
        let t = l.trim();
        if t.starts_with("Note: Use -a flag") {
            // DCGM 4.5 lists the active GPUs only, unless asked for all.
            p.warn(format!(
                "line {ln}: only active GPUs are listed (`{t}`): `dcgmi discovery -l -a` lists every GPU"
            ));
            continue;
        }
        if let Some((n, entity)) = count_line(t) {
            section = entity.clone();
            first_count_line.get_or_insert(ln);
            match entity.as_str() {
                "gpu" => gpu_count = Some(n),
                "nvswitch" => {
                    p.count("dcgm.nvswitch_count", n);
                }
                other => {
                    p.count(&format!("dcgm.{other}_count"), n);
                }
            }
            continue;
        }
        if section != "gpu" {
            continue;
        }
        let Some((id, info)) = row_of(t) else { continue };
        if let Some(name) = info.strip_prefix("Name:") {
            // DCGM 4.5's `-a` puts a `Status:` cell first: the name is then on a row without the id.
            if id.is_some_and(|id| !id.is_empty() && id.parse::<u32>().is_err()) {
                p.warn(format!("line {ln}: GPU row without a numeric id"));
            }
            let name = name.trim().trim_end_matches("(last known)").trim();
            let name = if name.is_empty() || name.contains("<<<NULL>>>") {
                "unknown"
            } else {
                name
            };
            if name == "unknown" {
                p.warn(format!("line {ln}: GPU name not reported by DCGM (<<<NULL>>>)"));
            }
            models.push(name.to_string());
        } else if let Some(u) = info.strip_prefix("Device UUID:") {
            uuids.push(u.trim().to_string());
        } else if let Some(b) = info.strip_prefix("PCI Bus ID:") {
            buses.push(b.trim().trim_end_matches("(last known)").trim().to_string());
        } else if let Some(st) = info.strip_prefix("Status:") {
            p.warn(format!("line {ln}: GPU status {}", st.trim()));
        }
    }
    let Some(n) = gpu_count else {
        return Err(ParseError::at(
            first_count_line.unwrap_or(1),
            "no `<N> GPUs found.` line: not `dcgmi discovery -l` output",
        ));
    };
    if models.len() as f64 != n {
        p.warn(format!(
            "count line says {n} GPU(s) but {} GPU row(s) were listed (cut short?)",
            models.len()
        ));
    }
    p.count("dcgm.gpu_count", n);
    p.list("gpu.models", models);
    p.list("gpu.uuids", uuids);
    p.list("gpu.pci_bus_ids", buses);
    Ok(p)
}

/// A GPU row's id cell and its `Key: value` cell: the box table's (`| 0 | Name: … |`), or the
/// same facts a line each without an id (`Name: …`), as issue reports paste them.
fn row_of(t: &str) -> Option<(Option<&str>, &str)> {
    if !t.starts_with('|') {
        return Some((None, t));
    }
    let mut cells = t.trim_matches('|').split('|').map(str::trim);
    let id = cells.next()?;
    Some((Some(id), cells.next()?))
}

/// `8 GPUs found.`, `1 GPU found (Active).`, `0 NvSwitches found.` → (n, "gpu" | "nvswitch" | …).
fn count_line(t: &str) -> Option<(f64, String)> {
    let (num, rest) = t.split_once(' ')?;
    let n: u32 = num.parse().ok()?;
    let (entity, tail) = rest.split_once(' ')?;
    if !tail.starts_with("found") {
        return None;
    }
    let e = entity.to_ascii_lowercase();
    let e = e
        .strip_suffix("es")
        .filter(|x| x.ends_with("switch"))
        .map(str::to_string)
        .unwrap_or(e);
    let e = e.strip_suffix('s').map(str::to_string).unwrap_or(e);
    Some((f64::from(n), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DCGM 4.5's `dcgmi discovery -l -a` (dcgmi/Query.cpp): a detached GPU's `Status:` cell comes
    /// first, its name on the next row without the id; without `-a` a note says GPUs are hidden.
    #[test]
    fn dcgm_4_5s_status_first_rows_and_its_note_are_read() {
        let all = "2 GPUs found (All).\n\
                   +--------+----------------------------------------------------------------------+\n\
                   | GPU ID | Device Information                                                   |\n\
                   +--------+----------------------------------------------------------------------+\n\
                   | 0      | Name: NVIDIA H100 80GB HBM3                                          |\n\
                   |        | PCI Bus ID: 00000000:18:00.0                                         |\n\
                   +--------+----------------------------------------------------------------------+\n\
                   | 1      | Status: DETACHED                                                     |\n\
                   |        | Name: NVIDIA H100 80GB HBM3                                          |\n\
                   |        | PCI Bus ID: 00000000:2A:00.0                                         |\n\
                   +--------+----------------------------------------------------------------------+\n";
        let p = parse(all).unwrap();
        assert_eq!(p.get_num("dcgm.gpu_count"), Some(2.0));
        assert!(!p.warnings.iter().any(|w| w.contains("numeric id")), "{:?}", p.warnings);
        assert!(
            p.warnings.iter().any(|w| w.contains("GPU status DETACHED")),
            "{:?}",
            p.warnings
        );
        let active = "1 GPU found (Active).\n\
                      Note: Use -a flag to show all GPUs, including those that are not active.\n\
                      +--------+----------------------------------------------------------------------+\n\
                      | 0      | Name: NVIDIA H100 80GB HBM3                                          |\n\
                      +--------+----------------------------------------------------------------------+\n";
        let p = parse(active).unwrap();
        assert!(
            p.warnings.iter().any(|w| w.contains("only active GPUs are listed")),
            "{:?}",
            p.warnings
        );
    }
}
