//! What evidence says: the parsers of each tool's output and the load points of a sweep.

pub mod load_points;
pub mod parsers;
