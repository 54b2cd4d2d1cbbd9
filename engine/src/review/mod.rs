//! The review's rules: the decision and the money per unit of work it reads.

pub mod cost_at_slo;
pub mod decision;
