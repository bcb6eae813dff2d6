//! bootstrap.sh's option grammar, read from the script itself: its `while [[ $# -gt 0 ]]; case
//! $key in … esac` loop, where each listed option takes the next word as its value (`$2` under
//! `set -o nounset`: a missing value kills it), `-h | --help` prints the usage and exits 1, and
//! every other word goes to a positional list whose first word is the cluster name. Options
//! differ between AMI releases, so the agent reads the node's own script, checks words against
//! it with nearest-option hints, and reads an argv back as the loop would.

use std::collections::BTreeSet;

use crate::base::text::printable;

/// KubeletConfiguration keys that go to the kubelet as flags on AL2, never into the file, each
/// with its flag: those bootstrap.sh rewrites in kubelet-config.json on every run (from
/// `/etc/eks/eni-max-pods.txt`; `maxPods` unless `--use-max-pods false`), and
/// `reservedSystemCPUs`, whose flag in `--kubelet-extra-args` is what stops bootstrap.sh setting
/// the reserved cgroups the kubelet refuses beside it.
pub const AL2_FLAG_KEYS: [(&str, &str); 3] = [
    ("maxPods", "--max-pods"),
    ("kubeReserved", "--kube-reserved"),
    ("reservedSystemCPUs", "--reserved-cpus"),
];

/// KubeletConfiguration keys bootstrap.sh rewrites in kubelet-config.json on every run whatever
/// they hold (`jq '.clusterDNS=…'`, `. += {"evictionHard": …}`), which the agent's
/// `kubelet.config` therefore gives as kubelet flags, the flag taking the file's place.
pub const AL2_REWRITTEN: [(&str, &str); 2] = [
    ("clusterDNS", "--cluster-dns"),
    ("evictionHard", "--eviction-hard"),
];

/// The hard eviction thresholds bootstrap.sh writes (and nodeadm's generated config holds).
pub const AL2_EVICTION_HARD: [(&str, &str); 3] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
];

/// The options of the newest AL2 bootstrap.sh (awslabs/amazon-eks-ami,
/// templates/al2/runtime/bootstrap.sh before AL2 was removed); every release's options are a
/// subset of these, each taking one value. Config checks use them; a node's own script is read.
pub const NEWEST_OPTIONS: [&str; 19] = [
    "--use-max-pods",
    "--b64-cluster-ca",
    "--apiserver-endpoint",
    "--kubelet-extra-args",
    "--enable-docker-bridge",
    "--aws-api-retry-attempts",
    "--docker-config-json",
    "--containerd-config-file",
    "--pause-container-account",
    "--pause-container-version",
    "--dns-cluster-ip",
    "--container-runtime",
    "--ip-family",
    "--service-ipv4-cidr",
    "--service-ipv6-cidr",
    "--enable-local-outpost",
    "--cluster-id",
    "--mount-bpf-fs",
    "--local-disks",
];

/// bootstrap.sh's options as its argument loop reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grammar {
    /// Options that take the next word as their value (their branch shifts twice).
    pub valued: BTreeSet<String>,
    /// Options that take no value (one shift).
    pub switches: BTreeSet<String>,
    /// Options that print the usage and exit (`-h | --help`).
    pub exits: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    #[error("has no `case $key in` … `esac` argument loop")]
    NoLoop,
    #[error("line {line}: cannot read the option pattern `{text}` (the agent reads literal options like `--flag)` or `-h | --help)`)")]
    Pattern { line: usize, text: String },
    #[error("line {line}: option `{option}` neither shifts once or twice nor exits")]
    Branch { line: usize, option: String },
    #[error("its argument loop lists no options")]
    Empty,
}

/// How the loop reads one argv: each option with its value in order, and the positional words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ReadBack {
    pub options: Vec<(String, Option<String>)>,
    pub positional: Vec<String>,
}

/// Where reading an argv back goes wrong, at word `index`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgFault {
    #[error("`{word}` makes bootstrap.sh print its usage and exit 1")]
    Exits { index: usize, word: String },
    #[error("`{option}` takes a value and none follows: bootstrap.sh would stop with `$2: unbound variable` (set -o nounset)")]
    MissingValue { index: usize, option: String },
}

impl Grammar {
    /// The newest AL2 bootstrap.sh's options ([`NEWEST_OPTIONS`]).
    pub fn newest() -> Grammar {
        Grammar {
            valued: NEWEST_OPTIONS.iter().map(|s| s.to_string()).collect(),
            switches: BTreeSet::new(),
            exits: ["-h", "--help"].iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Read the options from a bootstrap.sh: its first `case … in` on `$key` or `$1` up to its
    /// `esac`; each branch's literal patterns, and whether the branch shifts twice (a valued
    /// option), once (a switch) or exits.
    pub fn read(script: &str) -> Result<Grammar, GrammarError> {
        let mut lines = script.lines().enumerate();
        lines
            .by_ref()
            .find(|(_, l)| is_case_on_argv(l))
            .ok_or(GrammarError::NoLoop)?;
        let mut g = Grammar::default();
        // The open branch: its options, its first line, shifts seen, exits.
        let mut open: Option<(Vec<String>, usize, u32, bool)> = None;
        let mut closed = false;
        for (n, raw) in lines {
            let line = strip_comment(raw).trim();
            if line == "esac" {
                closed = true;
                if let Some(b) = open.take() {
                    g.add(b)?;
                }
                break;
            }
            if open.is_none() {
                if line.is_empty() {
                    continue;
                }
                let Some(pats) = line.strip_suffix(')') else {
                    return Err(GrammarError::Pattern {
                        line: n + 1,
                        text: printable(line),
                    });
                };
                let mut opts = Vec::new();
                for p in pats.split('|').map(str::trim) {
                    if p == "*" {
                        continue; // the positional branch
                    }
                    let literal = !p.is_empty()
                        && p.starts_with('-')
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                    if !literal {
                        return Err(GrammarError::Pattern {
                            line: n + 1,
                            text: printable(line),
                        });
                    }
                    opts.push(p.to_string());
                }
                open = Some((opts, n + 1, 0, false));
                continue;
            }
            let Some((_, _, shifts, exits)) = open.as_mut() else {
                continue;
            };
            for stmt in line.split(';').map(str::trim) {
                let mut words = stmt.split_whitespace();
                match words.next() {
                    Some("shift") => {
                        let by = words.next().map_or(Some(1), |w| w.parse::<u32>().ok());
                        *shifts = shifts.saturating_add(by.unwrap_or(u32::MAX));
                    }
                    Some("exit") => *exits = true,
                    _ => {}
                }
            }
            if line.ends_with(";;") {
                if let Some(b) = open.take() {
                    g.add(b)?;
                }
            }
        }
        if !closed {
            return Err(GrammarError::NoLoop);
        }
        if g.valued.is_empty() && g.switches.is_empty() {
            return Err(GrammarError::Empty);
        }
        Ok(g)
    }

    fn add(
        &mut self,
        (opts, line, shifts, exits): (Vec<String>, usize, u32, bool),
    ) -> Result<(), GrammarError> {
        for o in opts {
            let set = match (exits, shifts) {
                (true, _) => &mut self.exits,
                (false, 2) => &mut self.valued,
                (false, 1) => &mut self.switches,
                _ => return Err(GrammarError::Branch { line, option: o }),
            };
            set.insert(o);
        }
        Ok(())
    }

    pub fn is_option(&self, w: &str) -> bool {
        self.valued.contains(w) || self.switches.contains(w) || self.exits.contains(w)
    }

    /// Read `args` (argv without argv[0]) as the loop does.
    pub(crate) fn read_back(&self, args: &[String]) -> Result<ReadBack, ArgFault> {
        let mut r = ReadBack::default();
        let mut i = 0;
        while let Some(w) = args.get(i) {
            if self.exits.contains(w) {
                return Err(ArgFault::Exits {
                    index: i,
                    word: w.clone(),
                });
            }
            if self.valued.contains(w) {
                let v = args.get(i + 1).ok_or_else(|| ArgFault::MissingValue {
                    index: i,
                    option: w.clone(),
                })?;
                r.options.push((w.clone(), Some(v.clone())));
                i += 2;
            } else if self.switches.contains(w) {
                r.options.push((w.clone(), None));
                i += 1;
            } else {
                r.positional.push(w.clone());
                i += 1;
            }
        }
        Ok(r)
    }

    /// Problems with `handoff.extraBootstrapArgs` under this grammar, by element index: each
    /// must be an option followed by its value, read exactly as meant. `script` names it.
    pub(crate) fn check_extra(&self, extra: &[String], script: &str) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let mut i = 0;
        while let Some(w) = extra.get(i) {
            let shown = printable(w);
            if self.exits.contains(w) {
                out.push((
                    i,
                    format!("`{shown}` makes {script} print its usage and exit 1: remove it"),
                ));
                i += 1;
                continue;
            }
            if !self.is_option(w) {
                let msg = if w.starts_with('-') {
                    let hint = self
                        .closest(w)
                        .map(|c| format!("; did you mean `{c}`?"))
                        .unwrap_or_default();
                    format!("`{shown}` is not an option of {script}: it would become a positional word and be ignored{hint}")
                } else {
                    format!("`{shown}` is not an option: {script} takes the cluster name (cluster.name) as its only positional word and would ignore this one; give each option before its value")
                };
                out.push((i, msg));
                i += 1;
                continue;
            }
            if !seen.insert(w.as_str()) {
                out.push((i, format!("`{shown}` is given twice: {script} keeps the later value silently; give it once")));
            }
            if self.switches.contains(w) {
                i += 1;
                continue;
            }
            match extra.get(i + 1) {
                None => out.push((i, format!(
                    "`{shown}` takes a value and none follows: {script} would stop with `$2: unbound variable` (set -o nounset); add its value as the next element"
                ))),
                Some(v) if self.is_option(v) => out.push((i, format!(
                    "`{shown}` would take the option `{}` as its value: give `{shown}` its value as the next element",
                    printable(v)
                ))),
                Some(_) => {}
            }
            i += 2;
        }
        out
    }

    /// The option nearest to a typo (edit distance at most 3).
    fn closest(&self, w: &str) -> Option<&str> {
        self.valued
            .iter()
            .chain(&self.switches)
            .map(|o| (distance(o, w), o.as_str()))
            .filter(|(d, _)| *d <= 3)
            .min()
            .map(|(_, o)| o)
    }
}

fn is_case_on_argv(line: &str) -> bool {
    let t = strip_comment(line).trim();
    let Some(subject) = t.strip_prefix("case ").and_then(|r| r.strip_suffix(" in")) else {
        return false;
    };
    let s = subject.trim().trim_matches('"');
    matches!(s, "$key" | "${key}" | "$1" | "${1}")
}

/// A line without its trailing `# comment` (a `#` starting a word).
fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace()) {
            return &line[..i];
        }
    }
    line
}

/// Levenshtein distance (short words only: options are under 40 characters).
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 3 || b.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_the_options_of_the_newest_script_grammar() {
        let g =
            Grammar::read(include_str!("../../examples/al2-root/etc/eks/bootstrap.sh")).unwrap();
        assert_eq!(g, Grammar::newest());
    }

    #[test]
    fn reads_an_early_script_style() {
        // The 2018–2019 layout: compact `-h|--help)`, deeper indentation, a commented catch-all.
        let script = "#!/usr/bin/env bash\nset -o nounset\nPOSITIONAL=()\nwhile [[ $# -gt 0 ]]; do\n    key=\"$1\"\n    case $key in\n        -h|--help)\n            print_help\n            exit 1\n            ;;\n        --use-max-pods)\n            USE_MAX_PODS=\"$2\"\n            shift\n            shift\n            ;;\n        --b64-cluster-ca)\n            B64_CLUSTER_CA=$2\n            shift\n            shift\n            ;;\n        --apiserver-endpoint)\n            APISERVER_ENDPOINT=$2\n            shift; shift\n            ;;\n        --dry)  # a switch\n            shift\n            ;;\n        *)    # unknown option\n            POSITIONAL+=(\"$1\") # save it in an array for later\n            shift # past argument\n            ;;\n    esac\ndone\n";
        let g = Grammar::read(script).unwrap();
        assert_eq!(
            g.valued.iter().collect::<Vec<_>>(),
            ["--apiserver-endpoint", "--b64-cluster-ca", "--use-max-pods"]
        );
        assert_eq!(g.switches.iter().collect::<Vec<_>>(), ["--dry"]);
        assert_eq!(g.exits.iter().collect::<Vec<_>>(), ["--help", "-h"]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert_eq!(
            Grammar::read("#!/bin/sh\nexec foo \"$@\"\n"),
            Err(GrammarError::NoLoop)
        );
        let glob = "case $key in\n  --flag=*)\n    shift\n    ;;\nesac\n";
        assert!(matches!(
            Grammar::read(glob),
            Err(GrammarError::Pattern { line: 2, .. })
        ));
        let odd = "case \"$1\" in\n  --x)\n    X=$2\n    ;;\nesac\n";
        assert!(matches!(
            Grammar::read(odd),
            Err(GrammarError::Branch { line: 2, .. })
        ));
        let open = "case $key in\n  --x)\n    shift\n    ;;\n";
        assert_eq!(Grammar::read(open), Err(GrammarError::NoLoop));
    }

    #[test]
    fn extra_args_are_checked_against_the_grammar() {
        let g = Grammar::newest();
        let check = |w: &[&str]| g.check_extra(&words(w), "bootstrap.sh");
        let e = check(&["--use-max-pod", "false"]);
        assert_eq!(e[0].0, 0);
        assert!(
            e[0].1.contains("not an option of bootstrap.sh")
                && e[0].1.contains("did you mean `--use-max-pods`?"),
            "{e:?}"
        );
        let e = check(&["--use-max-pods"]);
        assert!(e[0].1.contains("`$2: unbound variable`"), "{e:?}");
        let e = check(&["--use-max-pods", "--dns-cluster-ip", "10.100.0.10"]);
        assert!(
            e[0].1
                .contains("would take the option `--dns-cluster-ip` as its value"),
            "{e:?}"
        );
        let e = check(&["--help"]);
        assert!(e[0].1.contains("exit 1"), "{e:?}");
        let e = check(&["--use-max-pods", "false", "--use-max-pods", "true"]);
        assert_eq!(e.len(), 1);
        assert!(e[0].1.contains("given twice"), "{e:?}");
        assert!(check(&["--use-max-pods", "false", "--local-disks", "raid0"]).is_empty());
        // A value that merely looks like a flag is a value (kubelet flags start with `--`).
        assert!(check(&["--docker-config-json", "--x"]).is_empty());
    }

    #[test]
    fn reads_back_like_the_loop() {
        let g = Grammar::newest();
        let r = g
            .read_back(&words(&["prod", "--use-max-pods", "false", "stray"]))
            .unwrap();
        assert_eq!(r.positional, ["prod", "stray"]);
        assert_eq!(
            r.options,
            [("--use-max-pods".to_string(), Some("false".to_string()))]
        );
        assert!(matches!(
            g.read_back(&words(&["prod", "--ip-family"])),
            Err(ArgFault::MissingValue { index: 1, .. })
        ));
        assert!(matches!(
            g.read_back(&words(&["-h"])),
            Err(ArgFault::Exits { index: 0, .. })
        ));
    }
}
