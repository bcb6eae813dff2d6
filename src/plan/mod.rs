//! The plan: everything the agent will do, computed purely from the spec and the facts, before
//! anything changes. Each aspect in the registry adds its steps, warnings and findings.
//! `--dry-run` prints the plan; the executor runs exactly these steps.

pub mod after;
pub mod aspects;
pub mod gate;
pub mod handoff;
pub mod join;
pub mod kubelet;
pub mod local;
pub mod out;
pub mod step;

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use sha2::Digest;

use crate::base::findings::{Finding, Invalid};
use crate::facts::{Facts, Family, TagState};
use crate::plan::aspects::{Input, Out, REGISTRY};
pub use crate::plan::step::Step;
use crate::plan::step::{File, Handoff, Note, Unit, UnitJob};
use crate::spec::Spec;

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub instance: Instance,
    pub family: Family,
    pub family_reason: String,
    /// The steps run before discovery and every check (the node's resolvers, `network`), so
    /// that every name the agent resolves goes through the servers the node will use. `init`
    /// runs them before it reads the instance and the cluster ([`before_discovery`]).
    #[serde(skip)]
    pub early: Vec<Step>,
    /// Whether `init` ran [`Plan::early`] already, before discovery (the executor then does not).
    #[serde(skip)]
    pub early_done: bool,
    pub steps: Vec<Step>,
    /// The steps after the hand-off ([`step::When::After`]), in the plan's order: the plan
    /// leaves them in this boot's job for the launch-hook unit ([`after`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<step::After>,
    pub warnings: Vec<String>,
    /// What the aspects say beside their steps, each under its own key (in the JSON) and
    /// with its lines (in the text), in registry order.
    #[serde(skip)]
    pub notes: Vec<Note>,
    /// The kubelet values the agent derived (max pods, reservations), and where each came from.
    #[serde(
        serialize_with = "kubelet::derived::serialize",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub derived: Vec<kubelet::Derived>,
    /// Values never to print (the cluster CA): replaced by a digest in every rendering.
    #[serde(skip)]
    pub secrets: Vec<String>,
    /// The steps run when a step of the first phase ([`step::When::First`]) fails: the
    /// run then changes nothing and hands nothing off.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_failure: Vec<Step>,
    /// What `init --dry-run` found running the checks that read only the node (none in a run
    /// that applies: its report has every result).
    #[serde(skip)]
    pub results: Vec<crate::verify::CheckResult>,
    /// The report's properties as the plan knows them before the run (what each aspect
    /// records), by key.
    #[serde(skip)]
    pub record: std::collections::BTreeMap<String, serde_json::Value>,
    /// The report properties that receive the run's phases with their times.
    #[serde(skip)]
    pub timelines: std::collections::BTreeSet<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub address: String,
    pub availability_zone: String,
    pub region: String,
    /// The Auto Scaling target lifecycle state, when IMDS serves one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_lifecycle_state: Option<String>,
}

/// A reload of systemd's units followed by another before any unit starts is the same reload
/// twice: the later one stays, required when either was (settings that write drop-ins each plan
/// their reload, and need only that one runs after their files).
fn one_reload_per_run_of_drop_ins(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    let mut pending: Option<usize> = None;
    for step in steps {
        match &step {
            Step::Unit(u) if u.job == UnitJob::Reload => {
                let mut u = u.clone();
                if let Some(i) = pending.take() {
                    if let Step::Unit(earlier) = out.remove(i) {
                        u.required |= earlier.required;
                    }
                }
                pending = Some(out.len());
                out.push(Step::Unit(u));
            }
            Step::Unit(_) | Step::Handoff(_) | Step::Run(_) => {
                pending = None;
                out.push(step);
            }
            _ => out.push(step),
        }
    }
    out
}

/// Whether the steps hand the node off now (not held, not done already in this boot).
pub(crate) fn hands_off(steps: &[Step]) -> bool {
    steps
        .iter()
        .any(|s| matches!(s, Step::Handoff(Handoff::Exec { .. } | Handoff::Dropin(_))))
}

/// The order the steps run in is the plan's: the registry's, with the hand-off last; the steps
/// after it are the plan's own list, with their job. The checks come before a hand-off, and the
/// steps after it follow one: none when this run hands nothing off (done already in this boot,
/// or held for a warm pool).
fn order(facts: &Facts, out: &mut Out) -> Vec<step::After> {
    let (steps, after) = after::split(std::mem::take(&mut out.steps), &mut out.findings);
    let (steps, gate) = gate::split(steps, &mut out.findings);
    out.steps = steps;
    let after = match hands_off(&out.steps) {
        true => {
            if let Some(gate) = &gate {
                gate::plan(facts, gate, out);
            }
            after::plan(facts, &after, out);
            after
        }
        false => {
            out.steps.retain(|s| !matches!(s, Step::Check(_)));
            Vec::new()
        }
    };
    out.steps.sort_by_key(|s| matches!(s, Step::Handoff(_)));
    out.steps = one_reload_per_run_of_drop_ins(std::mem::take(&mut out.steps));
    after
}

/// What the settings and the plan ask read of the node, given the detected family.
pub(crate) fn reads(spec: &Spec, family: Option<Family>, r: &mut crate::facts::Reads) {
    for a in REGISTRY {
        (a.reads)(spec, family, r);
    }
    r.file(after::AFTER_JOB);
    r.file(gate::GATE_JOB);
}

/// Every finding for this spec on this node, each aspect's in registry order.
pub fn findings(spec: &Spec, facts: &Facts) -> Vec<Finding> {
    match build(spec, facts) {
        Ok(_) => Vec::new(),
        Err(Invalid(f)) => f,
    }
}

/// Build the plan from (spec, facts). Pure: reads nothing, writes nothing. All problems found
/// on the node come back together.
pub fn build(spec: &Spec, facts: &Facts) -> Result<Plan, Invalid> {
    let mut out = Out::default();
    if let Err(e) = &facts.family {
        out.findings.push("handoff.mode", e.to_string());
    }
    let handoff = crate::plan::aspects::intent(spec, facts, &mut out.findings);
    out.warnings
        .extend(handoff.kubelet.warnings.iter().cloned());
    let input = Input {
        spec,
        facts,
        handoff: &handoff,
    };
    for aspect in REGISTRY {
        let before = out.steps.len();
        (aspect.plan)(&input, &mut out);
        tracing::debug!(
            aspect = aspect.name,
            steps = out.steps.len() - before,
            "planned"
        );
    }
    let after = order(facts, &mut out);
    let family = match (&facts.family, out.findings.is_empty()) {
        (Ok(f), true) => f.clone(),
        _ => return Err(Invalid(out.findings.0)),
    };
    let md = facts.instance.clone().unwrap_or_default();
    Ok(Plan {
        instance: Instance {
            address: md
                .private_ipv4
                .clone()
                .or_else(|| md.ipv6.clone())
                .unwrap_or_default(),
            instance_id: md.instance_id,
            instance_type: md.instance_type,
            availability_zone: md.availability_zone,
            region: md.region,
            target_lifecycle_state: md.target_lifecycle_state,
        },
        family: family.family,
        family_reason: family.reason,
        early: out.early,
        early_done: false,
        steps: out.steps,
        after,
        warnings: out.warnings,
        notes: out.notes,
        derived: handoff.kubelet.derived,
        on_failure: out.on_failure,
        results: Vec::new(),
        record: out.record,
        timelines: out.timelines,
        secrets: {
            // Several aspects carry the CA: each secret once.
            let mut seen = std::collections::BTreeSet::new();
            out.secrets.retain(|s| seen.insert(s.clone()));
            out.secrets
        },
    })
}

/// How a secret is shown: its length and a digest prefix, enough to tell two CAs apart.
pub(crate) fn redaction(secret: &str) -> String {
    let d = sha2::Sha256::digest(secret.as_bytes());
    let hex: String = d.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("<redacted {} bytes sha256:{hex}>", secret.len())
}

/// `text` with every secret replaced by its redaction (plans, the report).
pub(crate) fn redact(secrets: &[String], text: &str) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), &redaction(s));
    }
    out
}

impl Plan {
    /// The hand-off the plan ends with, as the report names it.
    pub fn handoff(&self) -> Option<String> {
        self.steps.iter().find_map(Step::handoff)
    }

    /// Whether the plan hands the node off now (not held, not done already in this boot).
    pub fn hands_off(&self) -> bool {
        hands_off(&self.steps)
    }

    /// Whether any step runs before the changes (and so the on-failure steps may run).
    pub fn first_phase(&self) -> bool {
        self.steps.iter().any(|s| s.when() == step::When::First)
    }

    pub fn changes(&self) -> usize {
        self.early
            .iter()
            .chain(&self.steps)
            .filter(|s| s.is_change())
            .count()
    }

    /// A stable JSON document, secrets redacted.
    pub fn to_json(&self) -> String {
        let mut v = serde_json::json!({
            "apiVersion": "eks-nodeinit/v1",
            "kind": "Plan",
            "instance": self.instance,
            "family": self.family,
            "familyReason": self.family_reason,
            "changes": self.changes(),
            "steps": self.steps,
            "warnings": self.warnings,
        });
        if !self.early.is_empty() {
            v["beforeDiscovery"] = serde_json::to_value(&self.early).unwrap_or_default();
        }
        if !self.after.is_empty() {
            v["afterHandoff"] = serde_json::to_value(&self.after).unwrap_or_default();
        }
        for n in &self.notes {
            v[n.key.as_str()] = n.value.clone();
        }
        if self.first_phase() && !self.on_failure.is_empty() {
            v["onFailure"] = serde_json::to_value(&self.on_failure).unwrap_or_default();
        }
        if !self.derived.is_empty() {
            v["derived"] = kubelet::derived::to_json(&self.derived);
        }
        if !self.results.is_empty() {
            v["checkResults"] = crate::verify::CheckResult::timeless(&self.results);
        }
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
        s.push('\n');
        redact(&self.secrets, &s)
    }

    /// Human-readable plan with unified diffs, secrets redacted.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let i = &self.instance;
        let _ = writeln!(
            o,
            "eks-nodeinit plan for {} ({}, {}, {})",
            i.instance_id, i.instance_type, i.address, i.availability_zone
        );
        let _ = writeln!(
            o,
            "node family: {} ({})",
            match self.family {
                Family::Al2 => "Amazon Linux 2, hand-off to bootstrap.sh",
                Family::Al2023 => "Amazon Linux 2023, hand-off to nodeadm",
            },
            self.family_reason
        );
        if let Some(s) = &i.target_lifecycle_state {
            let _ = writeln!(o, "target lifecycle state (Auto Scaling): {s}");
        }
        for line in self.notes.iter().flat_map(|n| &n.lines) {
            let _ = writeln!(o, "{line}");
        }
        kubelet::derived::render_text(&mut o, &self.derived);
        self.render_early(&mut o);
        let after = self.after.iter().filter_map(|a| match a {
            step::After::Check(c) => Some(c),
            step::After::Run(_) => None,
        });
        let now = self.steps.iter().filter_map(|s| match s {
            Step::Check(c) => Some(c),
            _ => None,
        });
        render_checks(&mut o, now.chain(after).collect());
        render_results(&mut o, &self.results);
        if self.changes() == 0 {
            let _ = writeln!(
                o,
                "no changes: tags, sysctls and files are already as configured"
            );
        }
        let first = self.early.len() + 1;
        if !self.early.is_empty() && !self.steps.is_empty() {
            let _ = writeln!(o, "\nthen, with the facts read and the checks run:");
        }
        for (n, s) in self.steps.iter().enumerate() {
            render_step(&mut o, first + n, s);
        }
        if !self.after.is_empty() {
            let _ = writeln!(o, "\n{AFTER}:");
        }
        for (n, s) in self.after.iter().enumerate() {
            render_step(&mut o, first + self.steps.len() + n, &Step::from(s.clone()));
        }
        if self.first_phase() && !self.on_failure.is_empty() {
            let _ = writeln!(
                o,
                "\nif a step before the changes fails (nothing changed, no hand-off):"
            );
            for s in &self.on_failure {
                let _ = writeln!(o, "  - {}", s.describe());
            }
        }
        if !self.warnings.is_empty() {
            let _ = writeln!(o, "\nwarnings:");
            for w in &self.warnings {
                let _ = writeln!(o, "  - {w}");
            }
        }
        redact(&self.secrets, &o)
    }
}

impl Plan {
    /// The steps before discovery, first: what they make of the node's resolvers is in force
    /// for every name the agent resolves after them.
    fn render_early(&self, o: &mut String) {
        if self.early.is_empty() {
            return;
        }
        let when = match self.early_done {
            true => "run before discovery and every check (done)",
            false => "run first, before discovery and every check",
        };
        let _ = writeln!(
            o,
            "{when}: the node's resolvers, so every name below (the API server, AWS) is resolved through them:"
        );
        for (n, s) in self.early.iter().enumerate() {
            render_step(o, n + 1, s);
        }
        o.push('\n');
    }
}

/// The steps before discovery (the node's resolvers): planned from the node's files alone,
/// before the instance and the cluster are read. Findings of its own stop the run.
pub fn before_discovery(spec: &Spec, facts: &Facts) -> Result<Vec<Step>, Invalid> {
    let mut out = Out::default();
    let handoff = aspects::intent(spec, facts, &mut crate::base::findings::Findings::default());
    let input = Input {
        spec,
        facts,
        handoff: &handoff,
    };
    (aspects::resolver::ASPECT.plan)(&input, &mut out);
    match out.findings.is_empty() {
        true => Ok(out.early),
        false => Err(Invalid(out.findings.0)),
    }
}

/// A file step: what it creates or updates, why, its mode, and the unified diff.
fn render_file(o: &mut String, n: usize, f: &File) {
    let what = if f.old.is_some() { "update" } else { "create" };
    let _ = write!(
        o,
        "\n[{n}] {what} {} ({}; mode {:04o}",
        f.path.display(),
        f.purpose,
        f.mode
    );
    if let Some(b) = &f.backup {
        let _ = write!(o, "; original kept as {}", b.display());
    }
    let _ = writeln!(o, ")");
    o.push_str(&unified_diff(&f.path, f.old.as_deref(), &f.new));
}

/// One step of the text plan, numbered `n`.
fn render_step(o: &mut String, n: usize, s: &Step) {
    match s {
        Step::Tag {
            instance_id,
            key,
            value,
            current,
            ..
        } => {
            let cur = match current {
                TagState::Is(c) => format!("currently `{c}`"),
                TagState::Absent => "currently unset".into(),
                TagState::Unknown => "current tags not visible in IMDS: DescribeTags first, CreateTags only if different".into(),
            };
            let _ = writeln!(o, "\n[{n}] tag {instance_id}: {key} = {value} ({cur})");
        }
        Step::Live(l) if l.path.starts_with("/proc/sys") => {
            let _ = writeln!(o, "\n[{n}] sysctl {}: {} -> {}", l.key, l.old, l.new);
        }
        Step::Live(l) => {
            let _ = writeln!(
                o,
                "\n[{n}] set {}: {} -> {}",
                l.path.display(),
                l.old,
                l.new
            );
        }
        Step::File(f) => render_file(o, n, f),
        Step::Remove(r) => {
            let _ = writeln!(o, "\n[{n}] remove {} ({})", r.path.display(), r.purpose);
        }
        Step::Run(r) => {
            let _ = writeln!(
                o,
                "\n[{n}] {}: exec {} (no shell)",
                r.purpose,
                r.argv.join(" ")
            );
            if let Some(check) = &r.check {
                let _ = writeln!(
                    o,
                    "      checked before any change: exec {}",
                    check.join(" ")
                );
            }
            if let Some(why) = &r.skip {
                let _ = writeln!(o, "      not run: {why}");
            }
        }
        Step::Unit(u) => render_unit(o, n, u),
        Step::Check(c) => render_check(o, n, c),
        Step::Call(c) => {
            let _ = writeln!(o, "\n[{n}] {}", c.purpose);
        }
        Step::Record(r) => {
            let _ = writeln!(o, "\n[{n}] record {}.{} = {}", r.property, r.key, r.value);
        }
        Step::Handoff(h) => render_handoff(o, n, h),
    }
}

/// How the steps after the hand-off run, in the text plan.
const AFTER: &str = "after the hand-off (eks-nodeinit-launch-hook.service runs these once kubelet is active, before the proof; a failure stops the ones after it and is named in the join's verdict)";

/// How the plan's checks run: together, under one budget, before the changes or beside them;
/// and, once, each reason some are not run here.
fn render_checks(o: &mut String, checks: Vec<&step::CheckStep>) {
    for when in [step::When::First, step::When::Beside, step::When::Gate] {
        let of: Vec<_> = checks.iter().filter(|c| c.when == when).collect();
        let Some(budget) = of.iter().map(|c| c.budget_ms).max() else {
            continue;
        };
        let how = match when {
            step::When::First => "before any change; a failed check that counts stops the run, no hand-off",
            step::When::Gate => "before the kubelet starts, right before bootstrap.sh; a failed check stops nothing, the Node's conditions say it",
            _ => "beside the changes; a failed check is logged at error priority and the hand-off goes on",
        };
        let _ = writeln!(
            o,
            "checks: {} run together within {budget} ms ({how})",
            of.len()
        );
    }
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for why in checks.iter().filter_map(|c| c.check.skip.as_deref()) {
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => reasons.push((why, 1)),
        }
    }
    for (why, n) in reasons {
        let _ = writeln!(o, "checks not run here ({n}): {why}");
    }
}

/// What the dry run found running the checks that read only the node.
fn render_results(o: &mut String, results: &[crate::verify::CheckResult]) {
    if results.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "checks run by this dry run (each reads only the node under the root):"
    );
    for r in results {
        let _ = writeln!(o, "  - {}: {}", r.word(), r.line());
    }
}

/// A check, numbered `n`.
fn render_check(o: &mut String, n: usize, c: &step::CheckStep) {
    let c = &c.check;
    let skipped = match c.skip {
        Some(_) => "; not run here, see above",
        None => "",
    };
    let _ = writeln!(
        o,
        "\n[{n}] check {} (changes nothing{skipped})",
        c.probe.describe()
    );
}

/// A unit job, numbered `n`.
fn render_unit(o: &mut String, n: usize, u: &Unit) {
    let _ = match &u.job {
        UnitJob::Start { unit } => writeln!(o, "\n[{n}] start {unit} over D-Bus: {}", u.why),
        UnitJob::Restart { unit, verify } => writeln!(
            o,
            "\n[{n}] restart {unit} over D-Bus and expect {} = {}",
            verify.property, verify.expected
        ),
        UnitJob::Reload => writeln!(
            o,
            "\n[{n}] reload systemd's units over D-Bus (Manager.Reload): {}",
            u.why
        ),
    };
}

/// The hand-off, numbered `n`.
fn render_handoff(o: &mut String, n: usize, h: &Handoff) {
    match h {
        Handoff::Exec { argv, env } => {
            let _ = writeln!(
                o,
                "\n[{n}] hand-off: exec {} (no shell), argv:",
                argv.first().map_or("", String::as_str)
            );
            for (j, a) in argv.iter().enumerate() {
                let _ = writeln!(o, "      [{j}] {a}");
            }
            for (k, v) in env {
                let _ = writeln!(o, "      with {k}={v}");
            }
        }
        Handoff::Dropin(h) => {
            let _ = writeln!(
                o,
                "\n[{n}] hand-off: NodeConfig drop-in {}; {}",
                h.dropin.display(),
                h.note()
            );
        }
        Handoff::Hold(h) => render_hold(o, n, h),
    }
}

/// The warm-pool hold, numbered `n`.
fn render_hold(o: &mut String, n: usize, h: &crate::plan::step::HandoffHold) {
    let marker = h.marker.display();
    let waits = match h.family {
        Family::Al2 => "bootstrap.sh is not exec'd".to_string(),
        Family::Al2023 => format!("nodeadm-run.service is skipped, so kubelet does not start (the package's drop-in: ConditionPathExists=!{marker})"),
    };
    let _ = writeln!(
        o,
        "\n[{n}] hand-off held: target lifecycle state {}: the steps above run now, the node does not join: {waits}; while {marker} exists no first-boot marker is written and eks-nodeinit-await-service.service polls the state: the boot after a start into service hands off, or, without a reboot, the waiter has eks-nodeinit.service run again at InService, which hands off",
        h.state
    );
}

/// A unified diff of one file, `/dev/null` for a new one.
pub fn unified_diff(path: &Path, old: Option<&str>, new: &str) -> String {
    let p = path.display().to_string();
    let a = if old.is_some() {
        format!("a{p}")
    } else {
        "/dev/null".into()
    };
    similar::TextDiff::from_lines(old.unwrap_or(""), new)
        .unified_diff()
        .context_radius(3)
        .header(&a, &format!("b{p}"))
        .to_string()
}

/// The hand-off intent for this spec on this node, its findings dropped: what the renderers
/// of a converged node render (tests compare a node's files with it).
pub fn handoff_intent(spec: &crate::spec::Spec, facts: &Facts) -> handoff::HandoffIntent {
    aspects::intent(spec, facts, &mut crate::base::findings::Findings::default())
}
