//! rentcheck's pure engines: sizing, the evidence parsers, the decision rules, ledger and money
//! arithmetic, and the plain types they share (validation, thresholds, criteria). No I/O, no
//! database, no web, no async runtime; the server (`rentcheck`) re-exports each module at the path
//! it always had (`rentcheck::sizing`, `rentcheck::evidence::parsers`, …), and the fuzz targets and
//! the parser benchmark use this crate alone. docs/architecture.md, "The floors".

pub mod criteria;
pub mod evidence;
pub mod figures;
pub mod ledger;
pub mod prices;
pub mod review;
pub mod sizing;
pub mod thresholds;
pub mod validation;
