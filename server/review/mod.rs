//! The review: the decision over everything gathered for a brief, its approval and its record.

pub mod decision;
