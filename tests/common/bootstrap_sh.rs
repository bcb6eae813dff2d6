//! A model of how the EKS AL2 AMI's `/etc/eks/bootstrap.sh` reads its argv, written from reading
//! the script (amazon-eks-ami, `templates/al2/runtime/bootstrap.sh`, its `while [[ $# -gt 0 ]]`
//! / `case $key in` loop), not copied from it:
//!
//! * the words are read left to right; a word equal to one of the script's options takes the
//!   next word as its value, whatever that word is (even one starting with `--`); the script
//!   runs under `set -o nounset`, so an option with no word after it stops the script (`$2`
//!   unbound);
//! * `-h` and `--help` print the usage and exit 1;
//! * every other word (`--flag=value`, an unknown `--flag`, an empty word) is kept as a
//!   positional; the cluster name is the first positional, and the script never reads the others.
//!
//! An option given twice keeps its last value (a plain shell assignment).

use super::BOOTSTRAP_OPTIONS;

/// What bootstrap.sh made of its argv.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// Each option and its value, in order.
    pub options: Vec<(String, String)>,
    /// The words that were not options or option values.
    pub positional: Vec<String>,
}

/// Why bootstrap.sh stopped while reading its argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// `-h` / `--help`: the usage, exit 1.
    Help,
    /// The option was the last word: `$2` is unbound under `set -o nounset`.
    MissingValue(String),
}

/// Read `args` (the argv without argv[0]) as bootstrap.sh's option loop does.
pub fn parse(args: &[String]) -> Result<Parsed, Refusal> {
    parse_with(BOOTSTRAP_OPTIONS, args)
}

/// The same loop for another script version's `options`.
pub fn parse_with(options: &[&str], args: &[String]) -> Result<Parsed, Refusal> {
    let mut out = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let key = args[i].as_str();
        if key == "-h" || key == "--help" {
            return Err(Refusal::Help);
        }
        if options.contains(&key) {
            let value = args
                .get(i + 1)
                .ok_or_else(|| Refusal::MissingValue(key.to_string()))?;
            out.options.push((key.to_string(), value.clone()));
            i += 2;
        } else {
            out.positional.push(key.to_string());
            i += 1;
        }
    }
    Ok(out)
}

impl Parsed {
    /// `CLUSTER_NAME`: the first positional word.
    pub fn cluster_name(&self) -> Option<&str> {
        self.positional.first().map(String::as_str)
    }

    /// The words bootstrap.sh reads but never uses: positionals after the cluster name.
    pub fn stray(&self) -> &[String] {
        self.positional.get(1..).unwrap_or(&[])
    }

    /// Options given more than once (all but the last value are lost).
    pub fn repeated(&self) -> Vec<&str> {
        let mut seen = std::collections::BTreeSet::new();
        let mut rep = Vec::new();
        for (o, _) in &self.options {
            if !seen.insert(o.as_str()) && !rep.contains(&o.as_str()) {
                rep.push(o.as_str());
            }
        }
        rep
    }
}
