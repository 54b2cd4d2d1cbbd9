//! Builders for what a test needs in its world, after crates.io's `crates_io_test_utils` builders
//! and docs.rs's `FakeRelease`: each starts from something valid, has a setter for each thing a
//! test author thinks about, and is saved through the real HTTP API as a person or agent would,
//! so a test reads as the world it sets up rather than as JSON merged into JSON.

pub mod briefs;
pub mod cards;
pub mod evidence;
pub mod ledgers;
pub mod prices;
pub mod trials;

pub use briefs::BriefBuilder;
pub use cards::CardBuilder;
pub use evidence::EvidenceBuilder;
pub use ledgers::{LedgerBuilder, LedgerCsv, LedgerLine};
pub use prices::{PriceRow, PriceSheet};
pub use trials::{first_trial_id, trials_of, TrialBuilder};

/// The answer's status must be `want`; its body is shown when it is not.
pub(crate) async fn expect_status(res: reqwest::Response, want: u16, what: &str) -> reqwest::Response {
    if res.status() == want {
        return res;
    }
    let status = res.status();
    panic!("{what}: {status}, not {want}: {}", res.text().await.unwrap_or_default());
}
