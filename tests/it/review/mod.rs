//! The review: the decision and its reasons, the money at the SLO, hardware checks, manual
//! approvals that override the computed action, the stored summaries, and the truth of the figures a manager approves.

mod api;
mod decision_truth;
mod hardware;
pub(crate) mod money_at_slo;
mod overrides;
mod summaries;
