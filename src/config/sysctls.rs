//! The `sysctls` section's values: a string or a number, as JSON allows.

use serde::{Deserialize, Serialize};

/// A sysctl value as written in JSON: a string (`"1024 65000"`) or a number (`524288`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SysctlValue {
    Int(i64),
    Str(String),
}

impl SysctlValue {
    pub(crate) fn as_string(&self) -> String {
        match self {
            SysctlValue::Int(i) => i.to_string(),
            SysctlValue::Str(s) => s.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn sysctl_values_accept_numbers_and_strings() {
        let c = parse(
            r#"{"cluster":{"name":"c"},"nodeGroup":{},"sysctls":{"a.b":5,"c.d":"1 2"}}"#,
            "c.json",
        )
        .unwrap();
        assert_eq!(c.sysctls["a.b"].as_string(), "5");
        assert_eq!(c.sysctls["c.d"].as_string(), "1 2");
    }
}
