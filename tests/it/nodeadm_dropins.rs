//! nodeadm's drop-in directory as the node holds it (`/etc/eks/nodeadm.d/` under `--root`), read
//! by the agent before it writes its own: the files nodeadm merges around the agent's, in name
//! order, each as nodeadm reads it.

use serde_json::Value;

use crate::common::*;
use crate::node::no_tagging;

const DIR: &str = "etc/eks/nodeadm.d";

fn put(root: &std::path::Path, name: &str, text: &str) {
    let dir = root.join(DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn master(root: &std::path::Path) -> std::path::PathBuf {
    config_with(root, "c.json", |v| {
        no_tagging(v);
        v["nodeGroup"]["role"] = "master".into();
    })
}

#[test]
fn a_baked_dropins_taint_is_carried_and_a_directory_or_a_readme_is_passed_over() {
    let root = sample_root("al2023-root");
    put(root.path(), "00-ami.YML", "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n      - --register-with-taints=ami=baked:NoExecute\n");
    put(root.path(), "README", "kind: not read\n");
    std::fs::create_dir_all(root.path().join(DIR).join("05-dir.yaml")).unwrap();
    let cfg = master(root.path());
    let out = init_with(root.path(), &cfg, &example("metadata.json"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(root.path().join(DIR).join("10-eks-nodeinit.json")).unwrap();
    let nc: Value = serde_json::from_str(&text).unwrap();
    let flags: Vec<&str> = nc["spec"]["kubelet"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        flags.contains(
            &"--register-with-taints=ami=baked:NoExecute,CriticalAddonsOnly=true:NoSchedule"
        ),
        "{flags:?}"
    );
    // Converged: a second run plans nothing.
    let again = init_with(root.path(), &cfg, &example("metadata.json"), &["--dry-run"]);
    let plan = stdout(&again);
    assert!(
        plan.contains("no changes: tags, sysctls and files are already as configured"),
        "{plan}"
    );
}

#[test]
fn a_dropin_nodeadm_cannot_read_changes_nothing() {
    let root = sample_root("al2023-root");
    put(
        root.path(),
        "20-typo.yaml",
        "apiVersion: node.eks.aws/v1\nkind: NodeConfig\n",
    );
    let cfg = master(root.path());
    let before = snapshot(root.path());
    let out = init_with(root.path(), &cfg, &example("metadata.json"), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let needle = "/etc/eks/nodeadm.d/20-typo.yaml is not a NodeConfig nodeadm can decode";
    assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    assert_eq!(before, snapshot(root.path()), "nothing changed");
}

#[test]
fn a_later_dropins_taints_flag_is_said_and_the_node_still_handed_off() {
    // A baked drop-in the whole fleet shares: the node joins with it, so it is not held back.
    let root = sample_root("al2023-root");
    let late = r#"{"apiVersion":"node.eks.aws/v1alpha1","kind":"NodeConfig","spec":{"kubelet":{"flags":["--register-with-taints=late:NoSchedule"]}}}"#;
    put(root.path(), "90-late.json", late);
    let cfg = master(root.path());
    let out = init_with(root.path(), &cfg, &example("metadata.json"), &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = format!("{}{}", stdout(&out), stderr(&out));
    let needle = "kubelet.flags[0] of the NodeConfig in /etc/eks/nodeadm.d/90-late.json gives --register-with-taints after the agent's";
    assert!(said.contains(needle), "{said}");
    assert!(root.path().join(DIR).join("10-eks-nodeinit.json").exists());
}
