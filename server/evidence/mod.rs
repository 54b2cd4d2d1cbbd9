//! Evidence: raw tool output uploaded from a rented machine, and what it says.

pub mod parsers;
