//! What the card evaluation (`acceptance::evaluate`) and the review decision (`review::decision`)
//! both say about one criterion: its status. One type on the ground floor, so the review reads the
//! card's outcome as it is instead of mapping a twin enum variant by variant.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Missing,
    /// The criterion does not apply to the trial's allocation (collectives on one GPU).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Missing => "missing",
            Status::NotApplicable => "n/a",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Status;

    #[test]
    fn the_wire_names_are_the_page_names() {
        for s in [Status::Pass, Status::Fail, Status::Missing, Status::NotApplicable] {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(serde_json::from_value::<Status>(s.as_str().into()).unwrap(), s);
        }
    }
}
