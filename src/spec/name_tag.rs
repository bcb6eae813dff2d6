//! The Name tag's settings: the node group's name (1-200 printable characters), whether tagging
//! is on.

use crate::base::findings::Findings;
use crate::config::Config;

#[derive(Debug, Clone)]
pub struct NameTagSpec {
    pub enabled: bool,
    /// `nodeGroup.name`; else the ASG name from the instance's tags.
    pub group: Option<String>,
}

pub fn spec(c: &Config, f: &mut Findings) -> NameTagSpec {
    let group = c.node_group.name.clone().filter(|g| {
        let ok = !g.is_empty() && g.len() <= 200 && !g.chars().any(|ch| ch.is_control());
        if !ok {
            f.push(
                "nodeGroup.name",
                "must be 1-200 printable characters (it prefixes the instance's Name tag)",
            );
        }
        ok
    });
    NameTagSpec {
        enabled: c.tagging.enabled,
        group,
    }
}
