//! What NCCL all-reduce bus bandwidth a healthy allocation reaches, from the cited table
//! `data/nccl_expected_busbw.csv` (sources in `data/README.md`).
//!
//! * Inside a node the GPUs' fabric bounds it: one row per fabric (NVSwitch generation, xGMI, PCIe
//!   generation) with the large-message all-reduce bus bandwidth of a full node.
//! * Across nodes the network bounds it: a ring all-reduce moves every byte over one NIC per GPU,
//!   so the figure is NICs used × what one NIC carries (`nic` rows, by line rate).
//!
//! The expected figure of an allocation is the smaller of the two. Measured ÷ expected is the share
//! of "what this topology should do". Above 100 % happens and is healthy: on two nodes NCCL's tree
//! and NVLink SHARP algorithms beat the ring bound, and an NVLink bridge the table does not assume
//! (NVL parts) lifts a PCIe figure.

use std::sync::OnceLock;

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct BusbwRow {
    pub id: String,
    /// `node` (a GPU fabric) or `nic` (a network link speed).
    pub scope: String,
    /// Catalogue names (`data/gpu_catalog.csv` `model`), matched exactly.
    pub catalog_gpus: Vec<String>,
    /// Pieces of the names `nvidia-smi` prints, matched as substrings.
    pub smi_names: Vec<String>,
    pub expected_busbw_gbps: f64,
    /// NIC line rate, Gb/s (`nic` rows).
    pub nic_gbps: Option<f64>,
    /// The NICs a node of this kind usually has: (count, Gb/s each).
    pub default_nics: Option<Nics>,
    /// `measured` or `derived`.
    pub basis: String,
    pub source: String,
    /// GPUs one NVLink domain joins across nodes (GB200 NVL72: the 72 GPUs of a rack's trays);
    /// None: the fabric ends at the node.
    pub domain_gpus: Option<u32>,
}

/// NICs per node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nics {
    pub count: u32,
    pub gbps: f64,
}

/// The expected bus bandwidth of an allocation, and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedBusbw {
    pub gbps: f64,
    /// The fabric row used.
    pub row: String,
    /// The NICs assumed across nodes (None on one node).
    pub nics: Option<Nics>,
    /// True when the NICs are the platform's usual ones, not the allocation's.
    pub nics_assumed: bool,
    /// One sentence a page can show: what bounds the figure.
    pub basis: String,
}

const TABLE: &str = include_str!("../../../../data/nccl_expected_busbw.csv");

/// The table, parsed once. A malformed row is a programming error caught by the unit test below.
pub fn table() -> &'static [BusbwRow] {
    static ROWS: OnceLock<Vec<BusbwRow>> = OnceLock::new();
    ROWS.get_or_init(|| parse_table(TABLE).unwrap_or_default())
}

fn parse_table(s: &str) -> Result<Vec<BusbwRow>, String> {
    let mut rdr = csv::Reader::from_reader(s.as_bytes());
    let mut rows = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| format!("row {}: {e}", i + 2))?;
        let col = |n: usize| rec.get(n).unwrap_or_default().trim();
        let list = |n: usize| -> Vec<String> {
            col(n)
                .split('|')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let expected: f64 = col(7)
            .parse()
            .map_err(|_| format!("row {}: expected_busbw_gbps", i + 2))?;
        rows.push(BusbwRow {
            id: col(0).to_owned(),
            scope: col(1).to_owned(),
            catalog_gpus: list(2),
            smi_names: list(3),
            expected_busbw_gbps: expected,
            nic_gbps: col(6).parse().ok(),
            default_nics: parse_nics(col(8)),
            basis: col(9).to_owned(),
            source: col(10).to_owned(),
            domain_gpus: col(11).parse().ok().filter(|n| *n > 0),
        });
    }
    Ok(rows)
}

/// `8x400` → 8 NICs of 400 Gb/s.
pub fn parse_nics(s: &str) -> Option<Nics> {
    let (n, g) = s.split_once(['x', 'X', '×'])?;
    Some(Nics {
        count: n.trim().parse().ok().filter(|n| *n > 0)?,
        gbps: g.trim().parse().ok().filter(|g: &f64| *g > 0.0)?,
    })
}

/// The fabric row for a GPU, by catalogue name or by the name `nvidia-smi` prints.
pub fn fabric_for(gpu: &str) -> Option<&'static BusbwRow> {
    let rows = || table().iter().filter(|r| r.scope == "node");
    if let Some(r) = rows().find(|r| r.catalog_gpus.iter().any(|c| c.eq_ignore_ascii_case(gpu))) {
        return Some(r);
    }
    let name = gpu.to_ascii_lowercase();
    rows().find(|r| r.smi_names.iter().any(|s| name.contains(&s.to_ascii_lowercase())))
}

/// What one NIC of `gbps` carries in a ring all-reduce: the table's row for that line rate, else
/// 94 % of the line rate (what the measured rows show).
pub fn per_nic_gbps(gbps: f64) -> f64 {
    table()
        .iter()
        .find(|r| r.scope == "nic" && r.nic_gbps == Some(gbps))
        .map(|r| r.expected_busbw_gbps)
        .unwrap_or(gbps / 8.0 * 0.94)
}

/// The expected all-reduce bus bandwidth of `gpus` GPUs named `gpu` over `nodes` nodes, with the
/// allocation's NICs per node when known. None for one GPU (no collective) or a GPU the table does
/// not know.
pub fn expected_busbw(gpu: &str, gpus: u32, nodes: u32, nics: Option<Nics>) -> Option<ExpectedBusbw> {
    let nodes = nodes.max(1);
    if gpus < 2 {
        return None;
    }
    let row = fabric_for(gpu)?;
    let per_node = gpus.div_ceil(nodes);
    let intra = (per_node > 1).then_some(row.expected_busbw_gbps);
    if nodes > 1 && row.domain_gpus.is_some_and(|d| gpus <= d) {
        return Some(ExpectedBusbw {
            gbps: row.expected_busbw_gbps,
            row: row.id.clone(),
            nics: None,
            nics_assumed: false,
            basis: format!("{gpus} GPUs on {nodes} nodes of one NVLink domain ({})", row.id),
        });
    }
    if nodes == 1 {
        return Some(ExpectedBusbw {
            gbps: row.expected_busbw_gbps,
            row: row.id.clone(),
            nics: None,
            nics_assumed: false,
            basis: format!("{per_node} GPUs on one node's {} fabric", row.id),
        });
    }
    let (nics, assumed) = match nics {
        Some(n) => (n, false),
        None => (row.default_nics?, true),
    };
    // A ring uses one NIC per GPU at most.
    let used = nics.count.min(per_node.max(1));
    let inter = f64::from(used) * per_nic_gbps(nics.gbps);
    let (gbps, bound) = match intra {
        Some(i) if i < inter => (i, format!("the {} fabric inside each node", row.id)),
        _ => (
            inter,
            format!(
                "{used} × {} Gb/s NIC{} per node{}",
                nics.gbps,
                if used == 1 { "" } else { "s" },
                if assumed {
                    " (the platform's usual, assumed)"
                } else {
                    ""
                }
            ),
        ),
    };
    Some(ExpectedBusbw {
        gbps,
        row: row.id.clone(),
        nics: Some(nics),
        nics_assumed: assumed,
        basis: format!("{gpus} GPUs on {nodes} nodes, bounded by {bound}"),
    })
}

/// Measured ÷ expected, in percent.
pub fn pct_of_expected(measured_gbps: f64, expected: &ExpectedBusbw) -> Option<f64> {
    (expected.gbps > 0.0 && measured_gbps.is_finite()).then(|| measured_gbps / expected.gbps * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_every_row_cites_a_source() {
        let rows = parse_table(TABLE).unwrap();
        assert_eq!(rows.len(), table().len());
        assert!(rows.iter().any(|r| r.scope == "node") && rows.iter().any(|r| r.scope == "nic"));
        for r in &rows {
            assert!(r.expected_busbw_gbps > 0.0, "{}", r.id);
            assert!(matches!(r.basis.as_str(), "measured" | "derived"), "{}", r.id);
            assert!(r.source.len() > 20, "{}", r.id);
            match r.scope.as_str() {
                "node" => assert!(r.default_nics.is_some() && !r.smi_names.is_empty(), "{}", r.id),
                "nic" => assert!(r.nic_gbps.is_some(), "{}", r.id),
                other => panic!("{}: scope {other}", r.id),
            }
        }
    }

    #[test]
    fn names_match_the_most_specific_fabric() {
        let id = |n: &str| fabric_for(n).map(|r| r.id.as_str());
        assert_eq!(id("H100 SXM"), Some("hopper-nvswitch"));
        assert_eq!(id("NVIDIA H100 80GB HBM3"), Some("hopper-nvswitch"));
        assert_eq!(id("NVIDIA H200"), Some("hopper-nvswitch"));
        assert_eq!(id("NVIDIA H200 NVL"), Some("pcie-gen5"));
        assert_eq!(id("NVIDIA A100-SXM4-80GB"), Some("ampere-nvswitch"));
        assert_eq!(id("NVIDIA A100 80GB PCIe"), Some("pcie-gen4"));
        assert_eq!(id("L40S"), Some("pcie-gen4"));
        assert_eq!(id("NVIDIA GeForce RTX 2080 Ti"), Some("pcie-gen3"));
        assert_eq!(id("Some Future GPU"), None);
    }

    #[test]
    fn expected_is_the_smaller_of_fabric_and_network() {
        // One node of 8 H100: the NVSwitch row.
        let one = expected_busbw("H100 SXM", 8, 1, None).unwrap();
        assert_eq!(one.gbps, 476.0);
        // Two nodes, the usual 8 × 400 Gb/s: 8 × 47 = 376 < 476, the network bounds it.
        let two = expected_busbw("H100 SXM", 16, 2, None).unwrap();
        assert_eq!(two.gbps, 376.0);
        assert!(two.nics_assumed && two.basis.contains("assumed"));
        // With only 4 × 200 Gb/s NICs: 4 × 23.5 = 94.
        let thin = expected_busbw("H100 SXM", 16, 2, Some(Nics { count: 4, gbps: 200.0 })).unwrap();
        assert_eq!(thin.gbps, 94.0);
        // One GPU per node uses one NIC: 23.5 on 200 Gb/s.
        let spread = expected_busbw("A100 80GB SXM", 4, 4, None).unwrap();
        assert_eq!(spread.gbps, 23.5);
        // No collective for one GPU; an unknown GPU has no figure.
        assert!(expected_busbw("H100 SXM", 1, 1, None).is_none());
        assert!(expected_busbw("Mystery", 8, 1, None).is_none());
        // 338.82 measured on 2 × 8 H100 with 8 × 200 Gb/s: 8 × 23.5 = 188 → 180 %.
        let a3 = expected_busbw("NVIDIA H100 80GB HBM3", 16, 2, Some(Nics { count: 8, gbps: 200.0 })).unwrap();
        let pct = pct_of_expected(338.82, &a3).unwrap();
        assert!((pct - 338.82 / 188.0 * 100.0).abs() < 1e-9);
        // A line rate without a row: 94 % of line rate.
        assert_eq!(per_nic_gbps(50.0), 50.0 / 8.0 * 0.94);
    }
}
