//! Findings: one problem with the config or the node, naming where it is and what to do. Every
//! check reports in this form, so all problems come back together before anything changes.

use std::fmt;

/// One problem: the config field (or node file) it concerns and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub field: String,
    pub message: String,
}

impl Finding {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// All findings, printed one per line; `main` maps this to exit code 3.
#[derive(Debug, thiserror::Error)]
#[error("the config is invalid ({} problem{}):\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, render(.0))]
pub struct Invalid(pub Vec<Finding>);

fn render(f: &[Finding]) -> String {
    f.iter()
        .map(|x| format!("  - {x}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Findings collected while checking, in order.
#[derive(Debug, Default)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(Finding::new(field, message));
    }
    /// Keep `Ok` values; record an `Err` under `field`.
    pub fn check<T>(&mut self, field: impl Into<String>, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.push(field, e);
                None
            }
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
