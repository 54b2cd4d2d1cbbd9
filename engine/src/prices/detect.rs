//! Which import a CSV file belongs to, from its header: a file chosen for the wrong import is
//! recognised, and the refusal says where it goes instead. No I/O.

/// The CSV imports that take files from elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Import {
    /// rentcheck's own price sheet (`provider,gpu,gpu_count,…`) on /prices.
    Sheet,
    /// A SkyPilot offer catalogue `vms.csv` on /prices (`format=skypilot`).
    Catalogue,
    /// A FinOps FOCUS cost-and-usage export on a brief's ledger (`format=focus`).
    Focus,
    /// The ledger's own CSV (`category,resource,…`).
    Ledger,
}

impl Import {
    /// Where a file of this kind is imported, in words.
    pub fn where_it_goes(self) -> &'static str {
        match self {
            Import::Sheet => {
                "a rentcheck price sheet: import it on the Prices page as a price sheet \
                 (POST /api/v1/prices)"
            }
            Import::Catalogue => {
                "a SkyPilot offer catalogue (vms.csv): import it on the Prices page as a SkyPilot \
                 catalogue (POST /api/v1/prices?format=skypilot&provider=NAME)"
            }
            Import::Focus => {
                "a FinOps FOCUS billing export: import it on a brief's ledger as a billing export \
                 (POST /api/v1/briefs/{id}/ledger?format=focus&trial=TID)"
            }
            Import::Ledger => "the ledger's own CSV: import it on a brief's ledger (POST /api/v1/briefs/{id}/ledger)",
        }
    }
}

/// What a header is, when it is clearly one of the imports' files.
pub fn kind_of(header: &[String]) -> Option<Import> {
    let has = |name: &str| header.iter().any(|h| h.trim().eq_ignore_ascii_case(name));
    if has("ChargePeriodStart") && has("ChargeCategory") && (has("BilledCost") || has("EffectiveCost")) {
        Some(Import::Focus)
    } else if has("InstanceType") && has("AcceleratorName") && has("Price") {
        Some(Import::Catalogue)
    } else if has("provider") && has("gpu") && has("rate_per_gpu_hour") {
        Some(Import::Sheet)
    } else if has("category") && has("resource") && has("amount") {
        Some(Import::Ledger)
    } else {
        None
    }
}

/// For a refusal of a file given to `this` import: ". This file looks like …" when its header is
/// another import's, else "".
pub fn belongs_elsewhere(header: &[String], this: Import) -> String {
    match kind_of(header) {
        Some(kind) if kind != this => format!(". This file looks like {}", kind.where_it_goes()),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(line: &str) -> Vec<String> {
        line.split(',').map(str::to_owned).collect()
    }

    #[test]
    fn each_imports_header_is_recognised() {
        let focus = header("BilledCost,BillingCurrency,ChargeCategory,ChargePeriodEnd,ChargePeriodStart,ResourceId");
        let gcp = header("InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice");
        let sheet = header("provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source");
        let ledger = header("category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency");
        assert_eq!(kind_of(&focus), Some(Import::Focus));
        assert_eq!(kind_of(&gcp), Some(Import::Catalogue));
        assert_eq!(kind_of(&sheet), Some(Import::Sheet));
        assert_eq!(kind_of(&ledger), Some(Import::Ledger));
        assert_eq!(kind_of(&header("a,b,c")), None);
        assert!(belongs_elsewhere(&focus, Import::Sheet).contains("format=focus"));
        assert!(belongs_elsewhere(&gcp, Import::Focus).contains("format=skypilot"));
        assert_eq!(belongs_elsewhere(&gcp, Import::Catalogue), "");
    }
}
