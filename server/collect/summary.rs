//! The table `collect` prints at the end: one row per step, what happened, and the evidence id or
//! the reason.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Created on the server (201).
    Sent,
    /// The server already had it: an earlier run in the same window sent the same bytes (200, replayed).
    Replayed,
    /// Nothing to send and nothing wrong (a tool that is not installed).
    Skipped,
    /// Something that should have been sent was not.
    Failed,
    /// `collect --plan`: the server already holds this step's evidence (an earlier run sent it).
    Held,
}

impl Outcome {
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Sent => "sent",
            Outcome::Replayed => "replayed",
            Outcome::Skipped => "skipped",
            Outcome::Failed => "failed",
            Outcome::Held => "held",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    pub step: String,
    pub kind: String,
    pub outcome: Outcome,
    /// The evidence id (with its parse status and notes), or the reason.
    pub detail: String,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub rows: Vec<Row>,
}

impl Summary {
    pub fn push(
        &mut self,
        step: impl Into<String>,
        kind: impl Into<String>,
        outcome: Outcome,
        detail: impl Into<String>,
    ) {
        self.rows.push(Row {
            step: step.into(),
            kind: kind.into(),
            outcome,
            detail: detail.into(),
        });
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.rows.iter().filter(|r| r.outcome == outcome).count()
    }

    pub fn failed(&self) -> usize {
        self.count(Outcome::Failed)
    }
}

/// Control characters (a tool's escape codes, a server's newlines) would break the table.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header = ["STEP", "KIND", "RESULT", "EVIDENCE / REASON"];
        let cells: Vec<[String; 4]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    clean(&r.step),
                    clean(&r.kind),
                    r.outcome.as_str().to_owned(),
                    clean(&r.detail),
                ]
            })
            .collect();
        let mut width = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, row: [&str; 4]| {
            writeln!(
                f,
                "{:<w0$}  {:<w1$}  {:<w2$}  {}",
                row[0],
                row[1],
                row[2],
                row[3],
                w0 = width[0],
                w1 = width[1],
                w2 = width[2]
            )
        };
        line(f, header)?;
        for row in &cells {
            line(f, [&row[0], &row[1], &row[2], &row[3]])?;
        }
        write!(
            f,
            "{} sent, {} replayed, {} skipped, {} failed",
            self.count(Outcome::Sent),
            self.count(Outcome::Replayed),
            self.count(Outcome::Skipped),
            self.count(Outcome::Failed)
        )?;
        match self.count(Outcome::Held) {
            0 => Ok(()),
            n => write!(f, ", {n} already held by the server"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lines_up_and_counts() {
        let mut s = Summary::default();
        s.push("nvidia-smi -L", "nvidia-smi-list", Outcome::Sent, "0190-abc (ok)");
        s.push(
            "dcgmi diag -r 2 -j",
            "dcgm-diag",
            Outcome::Skipped,
            "dcgmi not found\non PATH",
        );
        let text = s.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("STEP"));
        let col = lines[0].find("RESULT").unwrap();
        assert_eq!(&lines[1][col..col + 4], "sent");
        assert_eq!(&lines[2][col..col + 7], "skipped");
        assert!(lines[2].ends_with("dcgmi not found on PATH"));
        assert_eq!(lines[3], "1 sent, 0 replayed, 1 skipped, 0 failed");
        assert_eq!(s.failed(), 0);
    }
}
