//! The (value, label) choices the brief and trial forms offer in their selects.

use crate::sizing;

/// A select's choices as (value, label) pairs.
pub type Choices = Vec<(String, String)>;

/// Choices whose label is the value itself.
pub fn plain(values: impl IntoIterator<Item = &'static str>) -> Choices {
    values.into_iter().map(|v| (v.to_owned(), v.to_owned())).collect()
}

/// Every catalogue GPU, by model: "NVIDIA H100 SXM (80 GB)".
pub fn gpus() -> Choices {
    sizing::gpus()
        .iter()
        .map(|g| {
            (
                g.model.clone(),
                format!("{} {} ({} GB)", g.vendor, g.model, g.memory_gb),
            )
        })
        .collect()
}
