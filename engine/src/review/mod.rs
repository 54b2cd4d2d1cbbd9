//! The review's rules: the decision and the money per unit of work it reads.

pub mod decision;
pub mod money;
