//! The readiness checklist: eight confirmations before production, each by a named
//! person with a time and an optional link. Two items the system can prove from the data and
//! pre-checks: a load test is recorded (stage-3 bench-serving or vllm-metrics evidence) and a cost
//! view exists (ledger lines for the brief).

use serde::Serialize;
use sqlx::PgPool;

use super::repo::{self, Confirmation};
use crate::ids::BriefId;

/// (item, what it asks)
pub const ITEMS: [(&str, &str); 8] = [
    ("brief_complete", "The brief is complete"),
    ("allocation_fits", "The allocation boundary fits the workload"),
    (
        "image_restores",
        "An immutable image restores the model, data and checkpoints",
    ),
    ("load_test_recorded", "A load test is recorded"),
    ("health_alerts_owner", "Health checks and alerts have an owner"),
    (
        "shutdown_rule",
        "A shutdown / scale-down / reservation-review rule is written",
    ),
    ("cost_view", "A cost view per completed job exists"),
    ("fallback_path", "A fallback path for lost capacity exists"),
];

pub fn is_item(item: &str) -> bool {
    ITEMS.iter().any(|(i, _)| *i == item)
}

/// What the system proved for an item, with a link to the proof when there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Proof {
    pub says: String,
    pub link: Option<String>,
}

/// One line of the checklist.
#[derive(Debug, Clone, Serialize)]
pub struct ReadinessItem {
    pub item: &'static str,
    pub label: &'static str,
    /// Checked when confirmed by a person or proved by the data.
    pub checked: bool,
    pub proof: Option<Proof>,
    pub confirmed_by: Option<String>,
    pub confirmed_at: Option<String>,
    pub link: Option<String>,
}

/// Builds the checklist from the confirmations and the proofs. Pure.
pub fn checklist(confirmations: &[Confirmation], proofs: &[(&str, Proof)]) -> Vec<ReadinessItem> {
    ITEMS
        .iter()
        .map(|(item, label)| {
            let c = confirmations.iter().find(|c| c.item == *item);
            let proof = proofs.iter().find(|(i, _)| i == item).map(|(_, p)| p.clone());
            ReadinessItem {
                item,
                label,
                checked: c.is_some() || proof.is_some(),
                proof,
                confirmed_by: c.map(|c| c.confirmed_by.clone()),
                confirmed_at: c.map(|c| c.confirmed_at.format("%Y-%m-%d %H:%M UTC").to_string()),
                link: c.and_then(|c| c.link.clone()),
            }
        })
        .collect()
}

/// The checklist of one brief.
pub async fn load(pool: &PgPool, brief: BriefId) -> Result<Vec<ReadinessItem>, sqlx::Error> {
    let confirmations = repo::confirmations(pool, brief).await?;
    let mut proofs = Vec::new();
    if let Some(eid) = crate::evidence::service::load_test_evidence(pool, brief).await? {
        proofs.push((
            "load_test_recorded",
            Proof {
                says: "checked by rentcheck: stage-3 load-test evidence exists".into(),
                link: Some(format!("/evidence/{eid}")),
            },
        ));
    }
    if crate::ledger::service::has_lines(pool, brief).await? {
        proofs.push((
            "cost_view",
            Proof {
                says: "checked by rentcheck: the ledger has lines for this brief".into(),
                link: None,
            },
        ));
    }
    Ok(checklist(&confirmations, &proofs))
}

/// A link a person attached: http(s) or a path on this site, nothing that runs script.
pub fn valid_link(link: &str) -> bool {
    let l = link.trim();
    !l.is_empty()
        && l.len() <= 2000
        && (l.starts_with("https://") || l.starts_with("http://") || (l.starts_with('/') && !l.starts_with("//")))
        && !l.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    #[test]
    fn proofs_pre_check_and_people_confirm() {
        let c = Confirmation {
            item: "fallback_path".into(),
            confirmed_by: "ann@example.com".into(),
            confirmed_at: Utc::now(),
            link: Some("https://wiki.example.com/fallback".into()),
        };
        let proof = Proof {
            says: "checked by rentcheck".into(),
            link: None,
        };
        let list = checklist(&[c], &[("load_test_recorded", proof)]);
        assert_eq!(list.len(), 8);
        let checked: Vec<&str> = list.iter().filter(|i| i.checked).map(|i| i.item).collect();
        assert_eq!(checked, vec!["load_test_recorded", "fallback_path"]);
        let f = list.iter().find(|i| i.item == "fallback_path").unwrap();
        assert_eq!(f.confirmed_by.as_deref(), Some("ann@example.com"));
    }

    #[test]
    fn links_are_web_addresses_or_local_paths() {
        assert!(valid_link("https://runbooks.example.com/x"));
        assert!(valid_link("/evidence/abc"));
        assert!(!valid_link("javascript:alert(1)"));
        assert!(!valid_link("//evil.example.com"));
        assert!(!valid_link("https://a b"));
    }
}
