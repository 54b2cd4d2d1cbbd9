//! Price sheets, the pure part: which import a CSV header belongs to.

pub mod detect;
