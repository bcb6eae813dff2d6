//! The Amazon Linux 2 hand-off: `execv` of `/etc/eks/bootstrap.sh` with every flag and its value
//! as separate words (bootstrap.sh takes `--flag=value` as the cluster name).
//!
//! bootstrap.sh reads its argv with a `while [[ $# -gt 0 ]]; case $key in … esac` loop: each
//! listed option takes the next word as its value (`$2` under `set -o nounset`: a missing value
//! kills it), `-h | --help` prints the usage and exits 1, and every other word goes to a
//! positional list whose first word is the cluster name — so a typo is silently ignored. Its
//! options differ between AMI releases (`--service-ipv4-cidr` only since 2025-05), so the agent
//! reads them from the node's own script ([`Grammar::read`]) and refuses, before any change, an
//! argv that script would not read exactly as meant.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::config::HandoffSettings;
use crate::facts::{ExecLimits, Facts, Family};
use crate::findings::Findings;
use crate::fsutil::under;
use crate::marker::HandoffState;
use crate::plan::Step;
use crate::spec::{check_node_path, Spec};
use crate::text::{printable, unsplittable, unsplittable_problem};

use super::{Aspect, Out, Reads};

pub const ASPECT: Aspect = Aspect {
    name: "bootstrap",
    reads,
    plan,
};

/// Flags the agent sets itself from the config.
pub const FLAGS_OWNED: [&str; 6] = [
    "--b64-cluster-ca",
    "--apiserver-endpoint",
    "--kubelet-extra-args",
    "--container-runtime",
    "--service-ipv4-cidr",
    "--service-ipv6-cidr",
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

/// Written (per boot: /run is a tmpfs) just before bootstrap.sh is exec'd; a later run in the
/// same boot reads it ([`crate::marker`]) and hands off again only when bootstrap.sh never
/// started.
pub use crate::marker::MARKER;

#[derive(Debug, Clone)]
pub struct BootstrapSpec {
    /// bootstrap.sh's node path.
    pub path: PathBuf,
    /// `handoff.extraBootstrapArgs`, each word as given.
    pub extra_args: Vec<String>,
}

pub fn spec(h: &HandoffSettings, f: &mut Findings) -> BootstrapSpec {
    let mut extra_args = Vec::new();
    let mut ok = true;
    for (i, a) in h.extra_bootstrap_args.iter().enumerate() {
        let field = format!("handoff.extraBootstrapArgs[{i}]");
        if let Some(ch) = unsplittable(a) {
            f.push(&field, unsplittable_problem(a, ch));
            ok = false;
        } else if let Some((flag, value)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            f.push(&field, format!(
                "`{}`: bootstrap.sh takes `--flag value` only and would take `--flag=value` as the cluster name; write \"{}\", \"{}\" as two elements",
                printable(a), printable(flag), printable(value)
            ));
            ok = false;
        } else if FLAGS_OWNED.contains(&a.as_str()) {
            f.push(&field, format!(
                "`{a}` is set by eks-nodeinit from the config (cluster, labels, taints, kubelet.extraArgs); set it there"
            ));
            ok = false;
        }
        extra_args.push(a.clone());
    }
    if ok {
        // The grammar of the newest bootstrap.sh; the node's own script is checked at plan time.
        for (i, m) in Grammar::newest().check_extra(&extra_args, "bootstrap.sh") {
            f.push(format!("handoff.extraBootstrapArgs[{i}]"), m);
            ok = false;
        }
    }
    if !ok {
        // Reported once, here: the plan does not check the words against the node's script.
        extra_args.clear();
    }
    check_node_path("handoff.bootstrapPath", &h.bootstrap_path, f);
    BootstrapSpec {
        path: h.bootstrap_path.clone(),
        extra_args,
    }
}

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
pub struct ReadBack {
    pub options: Vec<(String, Option<String>)>,
    pub positional: Vec<String>,
}

/// Where reading an argv back goes wrong, at word `index`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgFault {
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
    pub fn read_back(&self, args: &[String]) -> Result<ReadBack, ArgFault> {
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
    pub fn check_extra(&self, extra: &[String], script: &str) -> Vec<(usize, String)> {
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

fn reads(spec: &Spec, family: Option<Family>, r: &mut Reads) {
    if family == Some(Family::Al2) {
        r.handoff_marker = true;
        r.file(spec.bootstrap.path.clone());
        r.executables.push(spec.bootstrap.path.clone());
    }
}

fn plan(spec: &Spec, facts: &Facts, out: &mut Out) {
    if facts.family() != Some(Family::Al2) {
        return;
    }
    if !hand_off_in_this_boot(facts, out) {
        return;
    }
    let mut f = Findings::default();
    if let Some(argv) = checked_argv(spec, facts, &mut f) {
        out.secrets
            .extend(facts.cluster(spec).certificate_authority.iter().cloned());
        out.steps.push(Step::ExecBootstrap { argv });
    }
    out.findings.0.extend(f.0);
}

/// Whether this run hands off, from what the per-boot marker shows; says why in `out`.
fn hand_off_in_this_boot(facts: &Facts, out: &mut Out) -> bool {
    match &facts.handoff {
        HandoffState::None => true,
        HandoffState::OtherBoot { recorded } => {
            out.warnings.push(format!(
                "{MARKER} is from another boot (boot id {}): /run should be a tmpfs; handing off",
                printable(recorded)
            ));
            true
        }
        HandoffState::Running { record } => {
            out.warnings.push(format!(
                "bootstrap.sh is running in this boot (pid {}, {MARKER}); not again: one hand-off per boot",
                record.pid
            ));
            false
        }
        HandoffState::Done { record, evidence } => {
            out.warnings.push(format!(
                "bootstrap.sh was already exec'd in this boot (pid {} at unix ms {}; it rewrote {} after {MARKER}); not again: one hand-off per boot",
                record.pid,
                record.at_unix_ms,
                evidence.display()
            ));
            false
        }
        HandoffState::NotStarted { record } => {
            out.warnings.push(format!(
                "{MARKER} records a hand-off at unix ms {} by pid {}, which is gone, and bootstrap.sh rewrote none of {} after it: bootstrap.sh never started (the run was stopped before its execve); handing off again",
                record.at_unix_ms,
                record.pid,
                crate::marker::EVIDENCE.join(", ")
            ));
            true
        }
        HandoffState::Unknown(why) => {
            out.findings.push("handoff", why.clone());
            false
        }
    }
}

/// The node's bootstrap.sh, read and executable, and its grammar.
fn node_grammar(spec: &Spec, facts: &Facts, f: &mut Findings) -> Option<Grammar> {
    const FIELD: &str = "handoff.bootstrapPath";
    let path = &spec.bootstrap.path;
    let shown = under(&facts.root, path).display().to_string();
    let text = match facts.files.get(path).map(|x| &x.content) {
        Some(Ok(Some(t))) => t,
        Some(Ok(None)) | None => {
            f.push(FIELD, format!("{shown} does not exist: nothing to hand the node to; check handoff.bootstrapPath or use handoff.mode \"al2023\""));
            return None;
        }
        Some(Err(e)) => {
            f.push(
                FIELD,
                format!("{e}: the agent reads bootstrap.sh's options before handing off to it"),
            );
            return None;
        }
    };
    if !facts.executable(path) {
        let mode = facts
            .files
            .get(path)
            .and_then(|x| x.mode)
            .map_or(String::new(), |m| format!(" (mode {m:04o})"));
        f.push(FIELD, format!(
            "{shown} is not executable{mode}: the hand-off would fail with `Permission denied` after every change; make it executable (chmod 0755) in the AMI"
        ));
    }
    match Grammar::read(text) {
        Ok(g) => Some(g),
        Err(e) => {
            f.push(FIELD, format!(
                "cannot read the options of {shown}: {e}; the agent checks every argv word against them before any change"
            ));
            None
        }
    }
}

/// The argv, checked against the node's bootstrap.sh and execve's limits.
fn checked_argv(spec: &Spec, facts: &Facts, f: &mut Findings) -> Option<Vec<String>> {
    let grammar = node_grammar(spec, facts, f)?;
    let shown = under(&facts.root, &spec.bootstrap.path)
        .display()
        .to_string();
    let before = f.0.len();
    for (i, m) in grammar.check_extra(&spec.bootstrap.extra_args, &shown) {
        f.push(format!("handoff.extraBootstrapArgs[{i}]"), m);
    }
    let argv = argv(spec, facts, &grammar, &shown, f)?;
    if f.0.len() > before {
        return None;
    }
    read_back_exactly(&grammar, &argv, &spec.cluster.name, &shown, f);
    check_exec_limits(&argv, &facts.exec_limits, f);
    (f.0.len() == before).then_some(argv)
}

/// The exact argv for bootstrap.sh (argv[0] is the script's path under the root), using the
/// options this script has: without `--service-ipv4-cidr` (before 2025-05) the service CIDR
/// goes as the DNS address bootstrap.sh would have derived from it (`--dns-cluster-ip`).
fn argv(
    spec: &Spec,
    facts: &Facts,
    g: &Grammar,
    script: &str,
    f: &mut Findings,
) -> Option<Vec<String>> {
    // The config's values with what discovery found.
    let c = facts.cluster(spec);
    let c = c.as_ref();
    let mut argv = vec![
        under(&facts.root, &spec.bootstrap.path)
            .display()
            .to_string(),
        c.name.clone(),
    ];
    let mut missing = Vec::new();
    let mut opt = |argv: &mut Vec<String>, o: &str, v: &str, field: &str| {
        if g.valued.contains(o) {
            argv.extend([o.to_string(), v.to_string()]);
        } else {
            missing.push((field.to_string(), o.to_string()));
        }
    };
    if let Some(ca) = &c.certificate_authority {
        opt(
            &mut argv,
            "--b64-cluster-ca",
            ca,
            "cluster.certificateAuthority",
        );
    }
    if let Some(ep) = &c.api_server_endpoint {
        opt(
            &mut argv,
            "--apiserver-endpoint",
            ep,
            "cluster.apiServerEndpoint",
        );
    }
    let user_dns = spec
        .bootstrap
        .extra_args
        .iter()
        .any(|a| a == "--dns-cluster-ip");
    match &c.cidr {
        // bootstrap.sh derives the cluster DNS address from the CIDR of its family.
        Some(cidr) if cidr.ipv6 => {
            opt(&mut argv, "--service-ipv6-cidr", &cidr.text, "cluster.cidr");
            opt(&mut argv, "--ip-family", "ipv6", "cluster.cidr");
        }
        Some(cidr) if g.valued.contains("--service-ipv4-cidr") => {
            opt(&mut argv, "--service-ipv4-cidr", &cidr.text, "cluster.cidr");
        }
        // Older scripts: the address bootstrap.sh derives (`${SERVICE_IPV4_CIDR%.*}.10`),
        // unless the operator gives one.
        Some(_) if user_dns => {}
        Some(cidr) => opt(
            &mut argv,
            "--dns-cluster-ip",
            &dns_ip(&cidr.text),
            "cluster.cidr",
        ),
        None => {}
    }
    opt(
        &mut argv,
        "--container-runtime",
        &spec.cluster.container_runtime,
        "cluster.containerRuntime",
    );
    let flags = spec.registration.kubelet_flags();
    if !flags.is_empty() {
        opt(
            &mut argv,
            "--kubelet-extra-args",
            &flags.join(" "),
            "labels, taints, kubelet.extraArgs",
        );
    }
    for (field, o) in &missing {
        let alt = if o == "--dns-cluster-ip" {
            " (nor --service-ipv4-cidr)"
        } else {
            ""
        };
        f.push(field.as_str(), format!(
            "{script} has no `{o}` option{alt}: it would take the flag and its value as positional words and lose them; use an AMI whose bootstrap.sh has it, or leave {field} unset"
        ));
    }
    if !missing.is_empty() {
        return None;
    }
    argv.extend(spec.bootstrap.extra_args.iter().cloned());
    Some(argv)
}

/// The DNS address bootstrap.sh derives from an IPv4 service CIDR: the text up to its last
/// `.`, then `.10` (`10.100.0.0/16` → `10.100.0.10`).
pub fn dns_ip(cidr: &str) -> String {
    let head = cidr.rsplit_once('.').map_or(cidr, |(h, _)| h);
    format!("{head}.10")
}

/// The script must read the argv back as meant: the cluster name as its one positional word,
/// no option twice.
fn read_back_exactly(g: &Grammar, argv: &[String], name: &str, script: &str, f: &mut Findings) {
    let words = argv.get(1..).unwrap_or_default();
    match g.read_back(words) {
        Err(e) => f.push("handoff", format!("{script} would not read the argv: {e}")),
        Ok(r) => {
            if r.positional != [name] {
                f.push(
                    "handoff",
                    format!(
                        "{script} would read the positional words [{}], not just the cluster name",
                        r.positional
                            .iter()
                            .map(|w| format!("`{}`", printable(w)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            let mut seen = BTreeSet::new();
            for (o, _) in &r.options {
                if !seen.insert(o) {
                    f.push("handoff.extraBootstrapArgs", format!(
                        "`{o}` is set by eks-nodeinit from the config and again here: {script} would keep the later value silently; set it once"
                    ));
                }
            }
        }
    }
}

/// execve refuses a word over MAX_ARG_STRLEN or an argv and environment over ARG_MAX (`E2BIG`):
/// check both before any change.
fn check_exec_limits(argv: &[String], l: &ExecLimits, f: &mut Findings) {
    let what = |i: usize| match argv.get(i.wrapping_sub(1)).map(String::as_str) {
        Some("--kubelet-extra-args") => {
            "the --kubelet-extra-args value (labels, taints and kubelet.extraArgs)".to_string()
        }
        Some(o) if o.starts_with("--") => format!("the {o} value"),
        _ => format!("word {i}"),
    };
    if let Some(max) = l.max_arg_strlen {
        for (i, w) in argv.iter().enumerate() {
            if w.len() >= max {
                f.push("handoff", format!(
                    "{} is {} bytes; Linux passes at most {} bytes per argument to a program (MAX_ARG_STRLEN): the hand-off would fail with `Argument list too long` after every change; use fewer or shorter labels, taints or extra arguments",
                    what(i), w.len(), max - 1
                ));
            }
        }
    }
    if let Some(max) = l.arg_max {
        let ptr = std::mem::size_of::<usize>();
        // Each word with its NUL and pointer, the script's path once more (the kernel keeps it),
        // and the environment bootstrap.sh inherits.
        let total = argv
            .iter()
            .fold(l.env_bytes, |n, w| n.saturating_add(w.len() + 1 + ptr))
            .saturating_add(argv.first().map_or(0, |p| p.len() + 1));
        if total > max {
            f.push("handoff", format!(
                "bootstrap.sh's argv and environment take {total} bytes; this system passes at most {max} (ARG_MAX): the hand-off would fail with `Argument list too long` after every change; use fewer labels, taints or extra arguments"
            ));
        }
    }
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

    #[test]
    fn dns_address_as_bootstrap_sh_derives_it() {
        assert_eq!(dns_ip("10.100.0.0/16"), "10.100.0.10");
        assert_eq!(dns_ip("172.20.0.0/16"), "172.20.0.10");
        assert_eq!(dns_ip("10.96.0.0/12"), "10.96.0.10");
    }
}
