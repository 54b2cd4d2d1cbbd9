//! `nvidia-smi topo -m`: the GPU↔GPU block of the connection matrix.
//!
//! Strategy (robust to tabs→spaces, a missing leading tab, ANSI codes and glued cells such as
//! `PXBNODE`): find the header (a line whose first token is `GPU0` and whose next token is not a link
//! value), count its `GPU<n>` columns (= n), then for each `GPU<k>` row take the first n link tokens,
//! splitting glued tokens into known link values. NIC rows/columns, affinity columns and the legend are
//! ignored. Ordering best→worst: X < NV# (more links = better) < PIX < PXB < PHB < NODE < SYS (old
//! drivers' `SOC` = SYS). `topo.worst_link` is the worst off-diagonal GPU pair, printed as the tool
//! prints it (`NV12`, `PIX`, …); a single GPU has no pair, so `topo.worst_link` is absent (a
//! topology criterion is then `missing`, not passed by `X`), `topo.nvlink_all_pairs` is false and
//! `topo.min_nvlinks` 0. `topo.min_nvlinks` is the weakest pair's NV#, 0 when any pair has no
//! NVLink. Unequal NV# counts are flagged (`topo.nvlink_uniform` = false + warning),
//! never "fixed". A GPU row that cannot be read, or missing rows, is an error naming the line.

use super::{text, ParseError, Parsed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    X,
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl Link {
    /// Larger = worse.
    fn rank(self) -> (u8, i64) {
        match self {
            Link::X => (0, 0),
            Link::Nv(n) => (1, -(n as i64)),
            Link::Pix => (2, 0),
            Link::Pxb => (3, 0),
            Link::Phb => (4, 0),
            Link::Node => (5, 0),
            Link::Sys => (6, 0),
        }
    }
    fn label(self) -> String {
        match self {
            Link::X => "X".into(),
            Link::Nv(n) => format!("NV{n}"),
            Link::Pix => "PIX".into(),
            Link::Pxb => "PXB".into(),
            Link::Phb => "PHB".into(),
            Link::Node => "NODE".into(),
            Link::Sys => "SYS".into(),
        }
    }
}

/// Split a token into link values (`PXBNODE` → [PXB, NODE]); None when it is not made of them.
fn split_links(tok: &str) -> Option<Vec<Link>> {
    let mut out = Vec::new();
    let mut rest = tok;
    while !rest.is_empty() {
        let (l, n) = if let Some(r) = rest.strip_prefix("NV") {
            let digits = r.chars().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 4 {
                return None;
            }
            let v: u32 = r.get(..digits)?.parse().ok()?;
            (Link::Nv(v), 2 + digits)
        } else if rest.starts_with("NODE") {
            (Link::Node, 4)
        } else if rest.starts_with("PIX") {
            (Link::Pix, 3)
        } else if rest.starts_with("PXB") {
            (Link::Pxb, 3)
        } else if rest.starts_with("PHB") {
            (Link::Phb, 3)
        } else if rest.starts_with("SYS") || rest.starts_with("SOC") {
            (Link::Sys, 3)
        } else if rest.starts_with('X') {
            (Link::X, 1)
        } else {
            return None;
        };
        out.push(l);
        rest = rest.get(n..)?;
    }
    Some(out)
}

fn gpu_index(tok: &str) -> Option<usize> {
    let d = tok.strip_prefix("GPU")?;
    if d.is_empty() || d.len() > 4 || !d.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    d.parse().ok()
}

/// One pass over the matrix's lines: header, rows, legend.
pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nvidia-smi".into()),
        ..Default::default()
    };
    let lines: Vec<std::borrow::Cow<'_, str>> =
        s.lines().map(text::strip_ansi_and_lost_escapes).map(unframed).collect();

    let header = find_header(&lines);
    let Some((hi, n)) = header else {
        return Err(ParseError::at(
            1,
            "no topology header (a line starting with GPU0 GPU1 … / CPU Affinity) found",
        ));
    };

    let rows = read_rows(&lines, hi, n, &mut p)?;

    evaluate(&rows, n, &mut p);
    Ok(p)
}

/// A line of the matrix as a Markdown or grid table writes it (READMEs and docs copy it so:
/// `| GPU0 | X | NV18 |`, `|------|`, `+------+`) as nvidia-smi prints it: the bars become spaces,
/// so the columns stay where they were, and a rule line becomes blank.
fn unframed(line: std::borrow::Cow<'_, str>) -> std::borrow::Cow<'_, str> {
    let t = line.trim_start();
    if !(t.starts_with('|') || t.starts_with('+')) {
        return line;
    }
    if t.chars().all(|c| matches!(c, '|' | '+' | '-' | '=' | ':' | ' ' | '\t')) {
        return std::borrow::Cow::Borrowed("");
    }
    if t.starts_with('+') {
        return line;
    }
    std::borrow::Cow::Owned(line.replace('|', " "))
}

/// The header line (`GPU0 GPU1 … CPU Affinity`): its index and how many GPU columns it has.
fn find_header(lines: &[std::borrow::Cow<'_, str>]) -> Option<(usize, usize)> {
    for (i, l) in lines.iter().enumerate() {
        let toks: Vec<&str> = l.split_whitespace().collect();
        if toks.first().copied() != Some("GPU0") {
            continue;
        }
        if toks.get(1).is_some_and(|t| split_links(t).is_some()) {
            continue; // a data row
        }
        let n = toks
            .iter()
            .enumerate()
            .take_while(|(j, t)| gpu_index(t) == Some(*j))
            .count();
        return Some((i, n));
    }
    None
}

/// The matrix's GPU rows after the header at `hi`, one per GPU column, each `n` links long.
fn read_rows(
    lines: &[std::borrow::Cow<'_, str>],
    hi: usize,
    n: usize,
    p: &mut Parsed,
) -> Result<Vec<Vec<Link>>, ParseError> {
    let mut m: Vec<Option<Vec<Link>>> = vec![None; n];
    let mut last_row_line = hi + 1;
    for (i, l) in lines.iter().enumerate().skip(hi + 1) {
        let ln = i + 1;
        let t = l.trim();
        if t.starts_with("Legend") {
            break;
        }
        // Markdown pastes put a blank line between the rows: read on while a GPU row is missing.
        if t.is_empty() {
            if m.iter().all(Option::is_some) {
                break;
            }
            continue;
        }
        let toks = text::tokens_with_col(l);
        let Some(&(_, label)) = toks.first() else {
            continue;
        };
        let Some(r) = gpu_index(label) else {
            if label.starts_with("NIC") || label.starts_with("mlx") || label.starts_with("CPU") {
                continue;
            }
            p.warn(format!("line {ln}: ignored unexpected row {label:?}"));
            continue;
        };
        last_row_line = ln;
        if r >= n {
            return Err(ParseError::at(
                ln,
                format!("row {label} but the header has only {n} GPU columns"),
            ));
        }
        let mut cells = row_cells(&toks, n, ln, label)?;
        cells.truncate(n);
        if let Some(slot) = m.get_mut(r) {
            if slot.is_some() {
                p.warn(format!("line {ln}: duplicate row {label}; the last one is used"));
            }
            *slot = Some(cells);
        }
    }
    let mut rows = Vec::with_capacity(n);
    for (r, row) in m.into_iter().enumerate() {
        match row {
            Some(v) => rows.push(v),
            None => {
                return Err(ParseError::at(
                    last_row_line + 1,
                    format!("row GPU{r} missing: the matrix has {n} GPU columns (paste cut short?)"),
                ));
            }
        }
    }
    Ok(rows)
}

/// The first `n` links of a row labelled `label`, at line `ln`.
fn row_cells(toks: &[(usize, &str)], n: usize, ln: usize, label: &str) -> Result<Vec<Link>, ParseError> {
    let mut cells = Vec::with_capacity(n);
    for &(col, tok) in toks.iter().skip(1) {
        if cells.len() >= n {
            break;
        }
        match split_links(tok) {
            Some(v) => cells.extend(v),
            None => {
                return Err(ParseError::at_col(
                    ln,
                    col,
                    format!(
                        "unreadable link value {tok:?} in row {label} (expected X, NV#, PIX, PXB, PHB, NODE or SYS)"
                    ),
                ));
            }
        }
    }
    if cells.len() < n {
        return Err(ParseError::at(
            ln,
            format!("row {label} has {} GPU cells, expected {n} (cut short?)", cells.len()),
        ));
    }
    Ok(cells)
}

/// The worst link, and whether every pair has the same number of NVLinks.
fn evaluate(rows: &[Vec<Link>], n: usize, p: &mut Parsed) {
    let mut worst = Link::X;
    let mut all_nv = n >= 2;
    let mut nv_counts: Vec<u32> = Vec::new();
    for (a, row) in rows.iter().enumerate() {
        for (b, &l) in row.iter().enumerate() {
            if a == b {
                if l != Link::X {
                    p.warn(format!("GPU{a}→GPU{a} is {} instead of X", l.label()));
                }
                continue;
            }
            let mirror = rows.get(b).and_then(|r| r.get(a)).copied();
            if mirror != Some(l) && a < b {
                p.warn(format!(
                    "matrix not symmetric: GPU{a}→GPU{b} is {} but GPU{b}→GPU{a} is {}",
                    l.label(),
                    mirror.map(|m| m.label()).unwrap_or_default()
                ));
            }
            if l == Link::X {
                p.warn(format!("GPU{a}→GPU{b} is X off the diagonal"));
            }
            if l.rank() > worst.rank() {
                worst = l;
            }
            match l {
                Link::Nv(c) => nv_counts.push(c),
                _ => all_nv = false,
            }
        }
    }
    let min_nv = nv_counts.iter().copied().min().unwrap_or(0);
    let max_nv = nv_counts.iter().copied().max().unwrap_or(0);
    if min_nv != max_nv {
        p.warn(format!(
            "NVLink counts differ between GPU pairs (NV{min_nv} … NV{max_nv}): a degraded link?"
        ));
    }
    p.count("topo.gpu_count", n as f64);
    if n >= 2 {
        p.text("topo.worst_link", worst.label());
    }
    p.boolean("topo.nvlink_all_pairs", all_nv);
    // The weakest pair's NVLinks: 0 when any pair has none (a bridged pair beside a PCIe card
    // must not pass `topo.min_nvlinks ≥ 4` for the whole box).
    p.count("topo.min_nvlinks", if all_nv { min_nv as f64 } else { 0.0 });
    if !nv_counts.is_empty() {
        p.boolean("topo.nvlink_uniform", min_nv == max_nv && all_nv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::parsers::MetricValue;

    /// The matrix as a README writes it in Markdown (kubernetes-sigs/dranet,
    /// examples/oke-bm-gpu-gb200-rocev2-dranet/README.md at b80c3c09: a GB200 tray, NIC columns cut
    /// here to two) and as a grid table.
    #[test]
    fn a_matrix_written_as_a_markdown_or_grid_table_is_read() {
        let markdown = "\
|      | GPU0 | GPU1 | GPU2 | GPU3 | NIC0 | NIC1 | CPU Affinity | NUMA Affinity | GPU NUMA ID |
|------|------|------|------|------|------|------|--------------|---------------|-------------|
| GPU0 | X    | NV18 | NV18 | NV18 | SYS  | SYS  | 0-71         | 0             | 2           |
| GPU1 | NV18 | X    | NV18 | NV18 | SYS  | SYS  | 0-71         | 0             | 10          |
| GPU2 | NV18 | NV18 | X    | NV18 | SYS  | SYS  | 72-143       | 1             | 18          |
| GPU3 | NV18 | NV18 | NV18 | X    | SYS  | SYS  | 72-143       | 1             | 26          |
| NIC0 | SYS  | SYS  | SYS  | SYS  | X    | PIX  |              |               |             |
| NIC1 | SYS  | SYS  | SYS  | SYS  | PIX  | X    |              |               |             |
";
        let p = parse(markdown).unwrap();
        assert_eq!(p.get_num("topo.gpu_count"), Some(4.0));
        assert_eq!(p.get_num("topo.min_nvlinks"), Some(18.0));
        assert_eq!(
            p.metrics.get("topo.worst_link"),
            Some(&MetricValue::Text("NV18".into()))
        );
        assert_eq!(p.metrics.get("topo.nvlink_all_pairs"), Some(&MetricValue::Bool(true)));

        let grid = "\
+------+------+------+--------------+
|      | GPU0 | GPU1 | CPU Affinity |
+======+======+======+==============+
| GPU0 | X    | NV12 | 0-47         |
+------+------+------+--------------+
| GPU1 | NV12 | X    | 0-47         |
+------+------+------+--------------+
";
        let p = parse(grid).unwrap();
        assert_eq!(p.get_num("topo.gpu_count"), Some(2.0));
        assert_eq!(p.get_num("topo.min_nvlinks"), Some(12.0));
    }
}
