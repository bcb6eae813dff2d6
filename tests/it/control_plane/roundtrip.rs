//! What the agent gives nodeadm, through the node's chain and back: nodeadm's containerd
//! template (the keys of amazon-eks-ami's `nodeadm/internal/containerd/config.template.toml` and
//! `config2.template.toml`, written here from reading them, not copied), the NodeConfig's
//! `containerd.config` merged over it as nodeadm's `combineContainerdConfigs` does (TOML maps
//! deep-merged, the NodeConfig's values winning), the suite's containerd 2.3's own
//! `config migrate` where nodeadm runs it (a version-2 template on containerd 2), and then the
//! agent reading the file nodeadm leaves: `pin-sandbox-image` against the suite's running
//! containerd, `bake-images` and the boot's image-cache check, and AL2's merge.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use toml_edit::{DocumentMut, Item, Table};

use super::images::{assert_pull_settings, cache_note, dump, planned, planned_with};
use super::ready;
use crate::common::control_plane::ControlPlane;
use crate::common::*;
use crate::common::{pods, registry, tls};

const DROPIN: &str = "/etc/eks/nodeadm.d/10-eks-nodeinit.json";

/// nodeadm's template of config `version` (2 or 3) as it renders it for a node without SOCI, the
/// socket the suite's containerd's and the sandbox the image it holds.
fn nodeadm_template(version: u8, sock: &Path) -> String {
    let head = format!(
        "version = {version}\nroot = \"/var/lib/containerd\"\nstate = \"/run/containerd\"\n\n[grpc]\naddress = \"{}\"\n\n",
        sock.display()
    );
    let sandbox = pods::SANDBOX_IMAGE;
    let body = match version {
        2 => format!("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"runc\"\ndiscard_unpacked_layers = true\n\n[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"{sandbox}\"\nenable_cdi = true\n\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\nconfig_path = \"/etc/containerd/certs.d:/etc/docker/certs.d\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nBinaryName = \"/usr/sbin/runc\"\nSystemdCgroup = true\n"),
        _ => format!("[plugins.'io.containerd.cri.v1.images']\ndiscard_unpacked_layers = true\n\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = \"{sandbox}\"\n\n[plugins.\"io.containerd.cri.v1.images\".registry]\nconfig_path = \"/etc/containerd/certs.d:/etc/docker/certs.d\"\n\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\n\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\ndefault_runtime_name = \"runc\"\n\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nBinaryName = \"/usr/sbin/runc\"\nSystemdCgroup = true\n"),
    };
    head + &body
}

/// `over` merged into `base`: tables merged key by key, every other value of `over` winning.
fn merge(base: &mut Table, over: &Table) {
    for (k, v) in over.iter() {
        match (base.get_mut(k).and_then(Item::as_table_mut), v.as_table()) {
            (Some(b), Some(o)) => merge(b, o),
            _ => {
                base.insert(k, v.clone());
            }
        }
    }
}

/// nodeadm's `combineContainerdConfigs`: `over` (the NodeConfig's `containerd.config`) merged
/// over `base`.
fn merged(base: &str, over: &str) -> String {
    let mut doc: DocumentMut = base.parse().unwrap();
    let over: DocumentMut = over.parse().unwrap();
    merge(doc.as_table_mut(), over.as_table());
    doc.to_string()
}

/// `containerd --config FILE config migrate`, as nodeadm runs it.
fn migrate(dir: &Path, config: &str) -> String {
    super::images::containerd_config(dir, config, "migrate")
}

fn at<'a>(doc: &'a DocumentMut, path: &[&str]) -> Option<&'a Item> {
    path.iter().try_fold(doc.as_item(), |i, k| i.get(k))
}

/// The drop-in's `containerd.config`, from a dry run on an AL2023 root with `metadata`.
fn fragment(root: &Path, metadata: &Path) -> String {
    let dropin: Value =
        serde_json::from_str(&planned_with(root, "al2023", DROPIN, metadata)).unwrap();
    let f = dropin["spec"]["containerd"]["config"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!f.contains("version"), "the fragment sets no version: {f}");
    f
}

/// An AL2023 root whose `/etc/containerd/config.toml` is `config`, its containerd state
/// directory `/var/lib/containerd` linked to the suite's.
fn node_with(cp: &ControlPlane, config: &str) -> tempfile::TempDir {
    let root = sample_root("al2023-root");
    let r = root.path();
    std::fs::create_dir_all(r.join("etc/containerd")).unwrap();
    std::fs::write(r.join("etc/containerd/config.toml"), config).unwrap();
    std::fs::create_dir_all(r.join("var/lib")).unwrap();
    std::os::unix::fs::symlink(
        cp.dir.path().join("containerd/root"),
        r.join("var/lib/containerd"),
    )
    .unwrap();
    root
}

/// `pin-sandbox-image` twice on `root`: the image labelled pinned in the suite's containerd,
/// and the second run finds the label there.
fn pin_twice(cp: &ControlPlane, root: &Path) {
    let pin = || {
        run(Command::new(bin())
            .args(["pin-sandbox-image", "--root"])
            .arg(root))
    };
    let first = pin();
    assert!(first.status.success(), "{}", stderr(&first));
    let again = pin();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already pinned"),
        "{}",
        stderr(&again)
    );
    let listed = tls::sh(pods::ctr(cp, "k8s.io").args(["images", "ls"]));
    let line = listed
        .lines()
        .find(|l| l.starts_with(pods::SANDBOX_IMAGE))
        .unwrap_or_default();
    assert!(line.contains("io.cri-containerd.pinned=pinned"), "{listed}");
}

#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn nodeadms_migrated_version_4_config_is_read_back_by_the_agent() {
    if !(ready() && peer_present(&missing_commands(&["ctr", "docker-registry"]))) {
        return;
    }
    let cp = ControlPlane::shared();
    pods::ensure_sandbox(&cp);
    let work = tempfile::tempdir().unwrap();
    let sock = cp.dir.path().join("containerd/containerd.sock");
    // nodeadm: the fragment names version 2's CRI table, so the version-2 template, merged,
    // then migrated by containerd 2.3: version 4, the socket in the gRPC plugin's table.
    let plain = sample_root("al2023-root");
    let f = fragment(plain.path(), &example("metadata.json"));
    let written = migrate(work.path(), &merged(&nodeadm_template(2, &sock), &f));
    let doc: DocumentMut = written.parse().unwrap();
    assert_eq!(
        at(&doc, &["version"]).and_then(Item::as_integer),
        Some(4),
        "{written}"
    );
    let grpc = at(
        &doc,
        &["plugins", "io.containerd.server.v1.grpc", "address"],
    );
    assert_eq!(
        grpc.and_then(Item::as_str),
        Some(sock.to_str().unwrap()),
        "{written}"
    );
    assert_pull_settings(&dump(work.path(), &written));
    // The agent reads it: the pin, the bake, the boot's check of the bake.
    let root = node_with(&cp, &written);
    pin_twice(&cp, root.path());
    let (_registry, port, _log) = registry::start_plain(work.path());
    let digest = registry::push_layers(&format!("http://127.0.0.1:{port}"), "suite/v4", "1", "1x1");
    let image = format!("127.0.0.1:{port}/suite/v4:1");
    let bake = run(Command::new(bin())
        .args(["bake-images", "--plain-http", "--image", &image, "--root"])
        .arg(root.path()));
    assert!(bake.status.success(), "{}", stderr(&bake));
    let note = cache_note(root.path());
    assert_eq!(
        note["present"],
        json!([format!("{image} ({digest})")]),
        "{note}"
    );
    // AL2's merge takes a version-4 template too, and containerd reads the result.
    let al2 = sample_root("al2-root");
    std::fs::write(
        al2.path().join("etc/eks/containerd/containerd-config.toml"),
        &written,
    )
    .unwrap();
    let given = planned(
        al2.path(),
        "al2",
        "/etc/eks-nodeinit/containerd-config.toml",
    );
    assert!(given.starts_with("version = 4"), "{given}");
    assert_pull_settings(&dump(work.path(), &given));
}

#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn a_users_version_3_config_stays_version_3_with_the_pull_settings_in_force() {
    if !(ready() && peer_present(&missing_commands(&["ctr"]))) {
        return;
    }
    let cp = ControlPlane::shared();
    pods::ensure_sandbox(&cp);
    let work = tempfile::tempdir().unwrap();
    let sock = cp.dir.path().join("containerd/containerd.sock");
    // The user data's NodeConfig gives containerd a version-3 config of its own.
    let users = "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_selinux = false\n";
    let ud = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: prod-eu\n  containerd:\n    config: |\n{}",
        users.lines().map(|l| format!("      {l}\n")).collect::<String>()
    );
    let mut md: Value =
        serde_json::from_str(&std::fs::read_to_string(example("metadata.json")).unwrap()).unwrap();
    md["userData"] = ud.into();
    let metadata = work.path().join("metadata.json");
    std::fs::write(&metadata, md.to_string()).unwrap();
    let plain = sample_root("al2023-root");
    let f = fragment(plain.path(), &metadata);
    assert!(f.contains("io.containerd.cri.v1.images"), "{f}");
    // nodeadm: the NodeConfigs merged (the drop-in last), version 3's tables in them, so the
    // version-3 template and no migration.
    let written = merged(&nodeadm_template(3, &sock), &merged(users, &f));
    let doc: DocumentMut = written.parse().unwrap();
    assert_eq!(
        at(&doc, &["version"]).and_then(Item::as_integer),
        Some(3),
        "{written}"
    );
    assert_pull_settings(&dump(work.path(), &written));
    let root = node_with(&cp, &written);
    pin_twice(&cp, root.path());
}
