//! Kernel modules: loaded now by `modprobe` (exec, no shell) and at every boot by
//! systemd-modules-load from one `modules-load.d` file. `modprobe --dry-run` runs first, before
//! any change, so a module the node does not have stops the run while nothing has changed.
//! A module is loaded already when `/proc/modules` lists it or `/sys/module/<name>` exists
//! (built in, with parameters); one built in without parameters shows in neither, and is asked
//! of modprobe again on each run (which does nothing for it).

use std::path::Path;

use crate::facts::{Facts, Family};
use crate::plan::step::{IfFailed, Mode, Run, Step};
use crate::spec::kernel::normalized;
use crate::spec::Spec;

use super::{Aspect, Input, Out, Reads};
use crate::facts::Read;

pub(crate) const ASPECT: Aspect = Aspect {
    name: "kernel modules",
    reads,
    plan,
    contribute: super::Contribution::Nothing,
};

pub const CONF: &str = "/etc/modules-load.d/eks-nodeinit.conf";
const PROC_MODULES: &str = "/proc/modules";
const MODPROBE: [&str; 2] = ["/usr/sbin/modprobe", "/sbin/modprobe"];
const RELEASE: &str = "kernel.osrelease";
const FIELD: &str = "kernel.modules";

fn sys_module(name: &str) -> String {
    format!("/sys/module/{}", normalized(name))
}

fn reads(spec: &Spec, _: Option<Family>, r: &mut Reads) {
    let Some(k) = &spec.kernel else { return };
    r.file(CONF);
    r.file(PROC_MODULES);
    r.ask(Read::Sysctl(RELEASE.into()));
    r.extend(MODPROBE.iter().map(|p| Read::Exists(p.into())));
    r.extend(k.modules.iter().map(|m| Read::Exists(sys_module(m).into())));
}

/// The `modules-load.d` file for these modules.
pub fn content(modules: &[String]) -> String {
    let mut s = String::from(
        "# Written by eks-nodeinit from its config (kernel.modules); rewritten on every run.\n",
    );
    for m in modules {
        s.push_str(m);
        s.push('\n');
    }
    s
}

fn plan(i: &Input, out: &mut Out) {
    let (Some(k), facts) = (&i.spec.kernel, i.facts) else {
        return;
    };
    let purpose = "kernel modules loaded at boot (systemd-modules-load)";
    let wrote = out.file(
        facts,
        FIELD,
        CONF,
        purpose,
        content(&k.modules),
        Mode::Keep(0o644),
    );
    let Some(modprobe) = MODPROBE.into_iter().find(|p| facts.exists(Path::new(p))) else {
        out.findings.push(
            FIELD,
            format!(
                "no modprobe under {}: install kmod, or leave `kernel` out",
                facts.root.display()
            ),
        );
        return;
    };
    let loaded = loaded(facts);
    let missing: Vec<&String> = k
        .modules
        .iter()
        .filter(|m| !loaded.contains(&normalized(m)) && !facts.exists(Path::new(&sys_module(m))))
        .collect();
    let here = facts.root == Path::new("/");
    // Under another root nothing is loaded: shown when the file changes, checked all the same.
    if missing.is_empty() || !(here || wrote) {
        return;
    }
    let Some(mut base) = modprobe_argv(facts, modprobe, out) else {
        return;
    };
    base.extend(["-a".into(), "--".into()]);
    let names = missing.iter().map(|m| m.to_string());
    let mut check = base.clone();
    check.insert(1, "--dry-run".into());
    let failed = IfFailed::new(
        "kernel modules not loaded",
        "install the package that ships them (on Amazon Linux, kernel-modules-extra for many), or remove them from kernel.modules",
    );
    let argv = base.into_iter().chain(names.clone()).collect();
    let skip = (!here).then(|| {
        format!(
            "--root is {}, not /: modules load only into the running kernel; on the node they do",
            facts.root.display()
        )
    });
    let run = Run::new("load kernel modules", argv, 60, failed).skip(skip);
    out.steps.push(Step::Run(
        run.checked_by(check.into_iter().chain(names).collect()),
    ));
}

/// modprobe as it runs here: the node's own, or, under another root, that root's module tree
/// for the root's kernel release.
fn modprobe_argv(facts: &Facts, modprobe: &str, out: &mut Out) -> Option<Vec<String>> {
    if facts.root == Path::new("/") {
        return Some(vec![modprobe.into()]);
    }
    let release = match facts.sysctl(RELEASE) {
        Some(Ok(r)) => r.clone(),
        Some(Err(e)) => {
            out.findings.push(FIELD, e.clone());
            return None;
        }
        None => {
            out.findings
                .push(FIELD, format!("{RELEASE} was not read from the node"));
            return None;
        }
    };
    let root = facts.root.display().to_string();
    let tool = facts.root.join(modprobe.trim_start_matches('/'));
    Some(vec![
        tool.display().to_string(),
        "-d".into(),
        root,
        "-S".into(),
        release,
    ])
}

/// The modules `/proc/modules` lists, by their kernel names.
fn loaded(facts: &Facts) -> Vec<String> {
    let text = facts
        .file(Path::new(PROC_MODULES))
        .and_then(|f| f.content.as_ref().ok())
        .and_then(Option::as_deref)
        .unwrap_or("");
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(normalized)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{findings, run, spec};
    use super::*;

    const CONFIG: &str =
        r#"{"cluster":{"name":"c"},"kernel":{"modules":["br_netfilter","nvme-tcp"]}}"#;

    fn node(loaded: &str, conf: Option<&str>) -> Facts {
        let f = Facts::builder(Family::Al2023)
            .exists("/usr/sbin/modprobe", true)
            .file(PROC_MODULES, loaded);
        let mut f = match conf {
            Some(c) => f.file(CONF, c),
            None => f.absent([CONF]),
        }
        .build();
        f.root = "/".into();
        f
    }

    #[test]
    fn the_file_and_modprobe_for_what_is_not_loaded_checked_first() {
        let out = run(
            &ASPECT,
            &spec(CONFIG),
            &node("br_netfilter 32768 0 - Live 0x0\n", None),
        );
        assert!(findings(&out).is_empty(), "{:?}", findings(&out));
        let [Step::File(f), Step::Run(r)] = &out.steps[..] else {
            panic!("{:?}", out.steps)
        };
        assert_eq!(
            f.new.lines().skip(1).collect::<Vec<_>>(),
            ["br_netfilter", "nvme-tcp"]
        );
        assert_eq!(r.argv, ["/usr/sbin/modprobe", "-a", "--", "nvme-tcp"]);
        assert_eq!(
            r.check.as_deref(),
            Some(
                &["/usr/sbin/modprobe", "--dry-run", "-a", "--", "nvme-tcp"].map(String::from)[..]
            )
        );
        assert_eq!(r.skip, None);
    }

    #[test]
    fn a_configured_node_plans_nothing() {
        let s = spec(CONFIG);
        let modules = ["br_netfilter".to_string(), "nvme-tcp".to_string()];
        let loaded = "br_netfilter 32768 0 - Live 0x0\nnvme_tcp 53248 0 - Live 0x0\n";
        let out = run(&ASPECT, &s, &node(loaded, Some(&content(&modules))));
        assert!(out.steps.is_empty(), "{:?}", out.steps);
    }

    #[test]
    fn no_modprobe_is_a_finding() {
        let mut f = Facts::builder(Family::Al2).absent([CONF]).build();
        f.root = "/".into();
        let out = run(&ASPECT, &spec(CONFIG), &f);
        assert!(
            findings(&out)[0].contains("no modprobe"),
            "{:?}",
            findings(&out)
        );
    }
}
