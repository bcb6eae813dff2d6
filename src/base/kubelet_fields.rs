//! The kubelet's config file fields (`KubeletConfiguration`, `kubelet.config.k8s.io/v1beta1`):
//! each top-level JSON name and the JSON kind the kubelet decodes into it, from k8s.io/kubelet's
//! own Go type (`kubelet_fields.tsv`, made by `tools/kubelet-fields` from v0.36.3). A value of
//! another kind makes the kubelet refuse its config and not start; a name not here is ignored.

/// The JSON kind a field takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Integer,
    Number,
    String,
    /// A string Go's `time.ParseDuration` reads (`metav1.Duration`).
    Duration,
    Array,
    Object,
}

impl Kind {
    fn of(word: &str) -> Option<Kind> {
        Some(match word {
            "bool" => Kind::Bool,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "string" => Kind::String,
            "duration" => Kind::Duration,
            "array" => Kind::Array,
            "object" => Kind::Object,
            _ => return None,
        })
    }

    /// The kind as the finding names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Bool => "a boolean",
            Kind::Integer => "an integer",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Duration => "a Go duration string",
            Kind::Array => "a list",
            Kind::Object => "a mapping",
        }
    }
}

const TABLE: &str = include_str!("kubelet_fields.tsv");

/// Every field, in name order.
pub fn fields() -> impl Iterator<Item = (&'static str, Kind)> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, kind) = l.split_once('\t')?;
            Some((name, Kind::of(kind)?))
        })
}

/// The field named `name` exactly (the kubelet's decoder is case-sensitive for these).
pub fn field(name: &str) -> Option<(&'static str, Kind)> {
    fields().find(|(n, _)| *n == name)
}

/// The field whose name differs from `name` only in case, for a finding's suggestion.
pub fn near(name: &str) -> Option<&'static str> {
    fields()
        .map(|(n, _)| n)
        .find(|n| n.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_table_is_read() {
        let lines = TABLE.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(fields().count(), lines);
        assert_eq!(field("podPidsLimit"), Some(("podPidsLimit", Kind::Integer)));
        assert_eq!(
            field("shutdownGracePeriod").map(|f| f.1),
            Some(Kind::Duration)
        );
        assert_eq!(field("evictionHard").map(|f| f.1), Some(Kind::Object));
        assert_eq!(field("podPIDsLimit"), None);
        assert_eq!(near("podPIDsLimit"), Some("podPidsLimit"));
    }
}
