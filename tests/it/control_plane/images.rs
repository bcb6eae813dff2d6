//! `images.pull` read by the real containerd 2 (`containerd config dump`: the config with its
//! imports, migrated to version 3, every plugin's section over its defaults): the file the agent
//! gives AL2's bootstrap.sh, from a version-3 and a version-2 template, and the fragment the
//! NodeConfig carries for nodeadm to merge, each shows the settings in the CRI images plugin,
//! and the template's own settings kept. And the pause image, pinned by the agent's
//! `pin-sandbox-image`, survives the real kubelet's image garbage collection, which removes an
//! unpinned image beside it. An image `bake-images` put into the store is found by its digest
//! at boot, and said to be pulled instead once it is gone.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::ready;
use crate::common::containerd;
use crate::common::control_plane::{peers_bin, wait_until, ControlPlane};
use crate::common::kubelet::{tail, Kubelet, Start};
use crate::common::*;
use crate::common::{pods, registry, tls};

const PULL: &str = r#"{"maxConcurrentDownloads": 8, "progressTimeout": "2m"}"#;

/// `containerd --config FILE config dump`, which must succeed.
pub(super) fn dump(dir: &Path, config: &str) -> String {
    containerd_config(dir, config, "dump")
}

/// `containerd --config FILE config VERB` (`dump`, `migrate`), which must succeed: its output.
pub(super) fn containerd_config(dir: &Path, config: &str, verb: &str) -> String {
    let f = dir.join("containerd.toml");
    std::fs::write(&f, config).unwrap();
    let out = Command::new(peers_bin().join("containerd"))
        .arg("--config")
        .arg(&f)
        .args(["config", verb])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{config}", stderr(&out));
    stdout(&out)
}

/// The lines of the dump's `[plugins.'io.containerd.cri.v1.images']` table.
pub(super) fn images_table(dump: &str) -> Vec<String> {
    dump.lines()
        .skip_while(|l| l.trim() != "[plugins.'io.containerd.cri.v1.images']")
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .map(|l| l.trim().to_string())
        .collect()
}

pub(super) fn assert_pull_settings(dump: &str) {
    let t = images_table(dump);
    for want in [
        "max_concurrent_downloads = 8",
        "image_pull_progress_timeout = '2m'",
    ] {
        assert!(t.iter().any(|l| l == want), "{want} not in {t:?}\n{dump}");
    }
}

/// The dry run's file or drop-in at `path`.
pub(super) fn planned(root: &Path, family: &str, path: &str) -> String {
    planned_with(root, family, path, &example("metadata.json"))
}

/// [`planned`] for the instance `metadata` describes.
pub(super) fn planned_with(root: &Path, family: &str, path: &str, metadata: &Path) -> String {
    let cfg = config_with(root, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["images"] = json!({ "pull": serde_json::from_str::<Value>(PULL).unwrap() });
    });
    let out = init_with(root, &cfg, metadata, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{family}: {}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == path);
    step.unwrap_or_else(|| panic!("{family}: no step writes {path}"))["new"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn containerd_2_reads_the_pull_settings_as_each_family_renders_them() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = |p: &str| dir.path().join(p).display().to_string();
    let v3 = format!("version = 3\nroot = \"{}\"\nstate = \"{}\"\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"registry.example/pause:3.10\"\n", d("root"), d("state"));
    let v2 = format!("version = 2\nroot = \"{}\"\nstate = \"{}\"\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.example/pause:3.10\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  discard_unpacked_layers = true\n", d("root"), d("state"));
    for template in [v3, v2] {
        let root = sample_root("al2-root");
        std::fs::write(
            root.path()
                .join("etc/eks/containerd/containerd-config.toml"),
            &template,
        )
        .unwrap();
        let given = planned(
            root.path(),
            "al2",
            "/etc/eks-nodeinit/containerd-config.toml",
        );
        let out = dump(dir.path(), &given);
        assert_pull_settings(&out);
        let kept = images_table(&out).join("\n");
        assert!(
            out.contains("sandbox = 'registry.example/pause:3.10'"),
            "{kept}\n{out}"
        );
    }
    let root = sample_root("al2023-root");
    let dropin = planned(
        root.path(),
        "al2023",
        "/etc/eks/nodeadm.d/10-eks-nodeinit.json",
    );
    let doc: Value = serde_json::from_str(&dropin).unwrap();
    let fragment = doc["spec"]["containerd"]["config"].as_str().unwrap();
    let own = format!("root = \"{}\"\nstate = \"{}\"\n", d("root"), d("state"));
    let out = dump(
        dir.path(),
        &fragment.replacen("version = 2\n", &format!("version = 2\n{own}"), 1),
    );
    assert_pull_settings(&out);
}

/// An image of the suite's own under `name`, unused by any container: the pause program with
/// bytes of its own appended, so that it is not the pause image under a second name (one image,
/// one pinned flag).
fn import(cp: &ControlPlane, pause: &Path, dir: &Path, name: &str) {
    let mut bytes = std::fs::read(pause).unwrap();
    bytes.extend_from_slice(name.as_bytes());
    let program = dir.join("program");
    std::fs::write(&program, bytes).unwrap();
    let tar = dir.join("image.tar");
    tls::sh(
        Command::new("python3")
            .arg(manifest_dir().join("tests/registry/oci_archive.py"))
            .arg(&tar)
            .arg(name)
            .arg(program),
    );
    tls::sh(pods::ctr(cp, "k8s.io").args(["images", "import"]).arg(&tar));
}

/// A kubelet under disk pressure at once (`nodefs`/`imagefs.available` below 99 %), with a
/// minimum image age of 1 s (0 means the default, 2 min): its eviction manager frees space by the image garbage collection every
/// 10 s, removing each image no container uses unless the CRI reports it pinned.
fn gc_kubelet(cp: &ControlPlane) -> Kubelet {
    let config = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "imageMinimumGCAge": "1s",
        "evictionHard": {"nodefs.available": "99%", "imagefs.available": "99%", "memory.available": "100Mi"},
        "evictionPressureTransitionPeriod": "5s",
    });
    let start = Start {
        config,
        dropins: vec![],
        flags: vec![],
    };
    Kubelet::start(cp, "images-gc", &start)
}

/// containerd 2 pins the image its config names in `pinned_images` by itself; containerd 1.7
/// (AL2) only pins one that carries the label, which an image pulled by `ctr` (AL2's
/// sandbox-image.service) or imported into an AMI lacks. The case models that: the root's
/// containerd config names an image of its own as the sandbox, which the running containerd
/// does not pin, so only the agent's label keeps it.
#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn the_pinned_pause_image_survives_the_kubelets_image_gc() {
    if !(ready() && peer_present(&missing_commands(&["ctr", "go"]))) {
        return;
    }
    let cp = ControlPlane::shared();
    let program = pods::ensure_sandbox(&cp);
    let work = tempfile::tempdir().unwrap();
    const KEPT: &str = "eks-nodeinit.test/node-pause:1";
    const VICTIM: &str = "eks-nodeinit.test/unused:1";
    import(&cp, &program, work.path(), KEPT);
    import(&cp, &program, work.path(), VICTIM);
    // containerd's config under a root, as bootstrap.sh or nodeadm leave it, naming KEPT.
    let root = work.path().join("root");
    std::fs::create_dir_all(root.join("etc/containerd")).unwrap();
    let own = std::fs::read_to_string(cp.dir.path().join("containerd/config.toml")).unwrap();
    std::fs::write(
        root.join("etc/containerd/config.toml"),
        own.replace(pods::SANDBOX_IMAGE, KEPT),
    )
    .unwrap();
    let out = run(Command::new(bin())
        .args(["pin-sandbox-image", "--root"])
        .arg(&root));
    assert!(out.status.success(), "{}", stderr(&out));
    let labels = tls::sh(pods::ctr(&cp, "k8s.io").args(["images", "ls"]));
    let line = labels
        .lines()
        .find(|l| l.starts_with(KEPT))
        .unwrap_or_default();
    assert!(line.contains("io.cri-containerd.pinned=pinned"), "{labels}");

    let mut kubelet = gc_kubelet(&cp);
    assert!(kubelet.accepted(&cp), "{}", tail(&kubelet.log_text()));
    let gone = wait_until(Duration::from_secs(120), || {
        !pods::images(&cp).lines().any(|l| l == VICTIM)
    });
    assert!(
        gone,
        "the kubelet's image GC never removed {VICTIM}: {}\n{}",
        pods::images(&cp),
        tail(&kubelet.log_text())
    );
    // Two more rounds of the collection (every 10 s): the pinned image is still there.
    let removed = wait_until(Duration::from_secs(25), || {
        !pods::images(&cp).lines().any(|l| l == KEPT)
    });
    let left = pods::images(&cp);
    assert!(!removed, "the pinned pause image was removed: {left}");
    assert!(
        left.lines().any(|l| l == pods::SANDBOX_IMAGE),
        "containerd's own sandbox image was removed: {left}"
    );
}

/// A sample AL2023 root whose containerd config is the suite's, its state directory named
/// `/var/lib/containerd` as on a node and linked there to the suite's.
fn baked_root(cp: &ControlPlane) -> tempfile::TempDir {
    let root = sample_root("al2023-root");
    let r = root.path();
    let own = std::fs::read_to_string(cp.dir.path().join("containerd/config.toml")).unwrap();
    let state = cp.dir.path().join("containerd/root");
    let config = own.replace(
        &format!("root = \"{}\"", state.display()),
        "root = \"/var/lib/containerd\"",
    );
    assert_ne!(config, own, "the suite's containerd config names its root");
    std::fs::create_dir_all(r.join("etc/containerd")).unwrap();
    std::fs::write(r.join("etc/containerd/config.toml"), config).unwrap();
    std::fs::create_dir_all(r.join("var/lib")).unwrap();
    std::os::unix::fs::symlink(&state, r.join("var/lib/containerd")).unwrap();
    root
}

/// Remove `image` from the suite's containerd under every name of its digest (the CRI adds the
/// image's ID as one), its blobs collected at once; the digest.
fn remove_every_name(cp: &ControlPlane, image: &str) -> String {
    let listed = tls::sh(pods::ctr(cp, "k8s.io").args(["images", "ls"]));
    let digest_of = |l: &str| l.split_whitespace().nth(2).map(String::from);
    let line = listed
        .lines()
        .find(|l| l.split_whitespace().next() == Some(image));
    let digest = line
        .and_then(digest_of)
        .unwrap_or_else(|| panic!("{image} not in {listed}"));
    let names: Vec<&str> = listed
        .lines()
        .filter(|l| digest_of(l).as_deref() == Some(digest.as_str()))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    tls::sh(
        pods::ctr(cp, "k8s.io")
            .args(["images", "rm", "--sync"])
            .args(&names),
    );
    digest
}

/// The dry run's `imageCache` note.
pub(super) fn cache_note(root: &Path) -> Value {
    let cfg = config_with(root, "c.json", |v| v["tagging"] = json!({"enabled": false}));
    let out = init(root, &cfg, &["--dry-run", "--output", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    plan["imageCache"].clone()
}

#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn an_image_baked_is_checked_at_every_boot_by_its_digest() {
    if !(ready() && peer_present(&missing_commands(&["ctr", "docker-registry"]))) {
        return;
    }
    let cp = ControlPlane::shared();
    let work = tempfile::tempdir().unwrap();
    let (_registry, port, _log) = registry::start_plain(work.path());
    let digest = registry::push_layers(
        &format!("http://127.0.0.1:{port}"),
        "suite/cached",
        "1",
        "2x1",
    );
    let image = format!("127.0.0.1:{port}/suite/cached:1");
    let root = baked_root(&cp);
    let bake = run(Command::new(bin())
        .args(["bake-images", "--plain-http", "--image", &image, "--root"])
        .arg(root.path()));
    assert!(bake.status.success(), "{}", stderr(&bake));
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(root.path().join("etc/eks-nodeinit/image-cache.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest,
        json!({"containerdRoot": "/var/lib/containerd", "images": [{"image": image, "digest": digest}]})
    );

    let note = cache_note(root.path());
    assert_eq!(
        note["present"],
        json!([format!("{image} ({digest})")]),
        "{note}"
    );
    // Gone from the store (its blobs collected at once): the plan says it will be pulled.
    assert_eq!(remove_every_name(&cp, &image), digest);
    let note = cache_note(root.path());
    assert_eq!(
        note["pulled"],
        json!([format!("{image} ({digest})")]),
        "{note}"
    );
}

/// `crictl` on the containerd at `sock`: the CRI calls a kubelet makes.
fn crictl(sock: &Path) -> Command {
    let ep = format!("unix://{}", sock.display());
    let mut c = Command::new(peers_bin().join("crictl"));
    c.args([
        "--runtime-endpoint",
        &ep,
        "--image-endpoint",
        &ep,
        "--timeout",
        "120s",
    ]);
    c
}

/// The whole AL2 road: a node's version-3 template (a working containerd config, its registry
/// hosts under `certs.d`), the agent's file for `--containerd-config-file` from it, and the real
/// containerd 2 started with that file, pulling through its CRI from the suite's registry.
#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn containerd_2_starts_with_the_al2_file_and_pulls_through_it() {
    if !(ready() && peer_present(&missing_commands(&["docker-registry"]))) {
        return;
    }
    assert!(
        peers_bin().join("crictl").exists(),
        "crictl: make peers-k8s"
    );
    let work = tempfile::tempdir().unwrap();
    let (_registry, port, _log) = registry::start_plain(work.path());
    registry::push_layers(
        &format!("http://127.0.0.1:{port}"),
        "suite/pulled",
        "1",
        "3x1",
    );
    let hosts = work.path().join("certs.d");
    let host = hosts.join(format!("127.0.0.1:{port}"));
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(
        host.join("hosts.toml"),
        format!("server = \"http://127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let images = format!(
        "[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = \"{}\"\n",
        hosts.display()
    );
    let (cfg, sock) = containerd::containerd_config(work.path(), &images);
    let root = sample_root("al2-root");
    std::fs::copy(
        &cfg,
        root.path()
            .join("etc/eks/containerd/containerd-config.toml"),
    )
    .unwrap();
    let given = planned(
        root.path(),
        "al2",
        "/etc/eks-nodeinit/containerd-config.toml",
    );
    std::fs::write(&cfg, &given).unwrap();
    let _containerd = containerd::start_containerd_with(work.path(), &cfg, &sock);
    // containerd read the setting, and says which road its CRI pulls take with it: its own,
    // where the CRI section's settings are the ones used (docs/images.md).
    let log = std::fs::read_to_string(work.path().join("containerd.log")).unwrap_or_default();
    assert!(
        log.contains("Found 'MaxConcurrentDownloads' in CRI config")
            && log.contains("Falling back to local image pull mode"),
        "{log}"
    );
    let image = format!("127.0.0.1:{port}/suite/pulled:1");
    let out = run(crictl(&sock).args(["pull", &image]));
    assert!(
        out.status.success(),
        "{}\n{}",
        stderr(&out),
        std::fs::read_to_string(work.path().join("containerd.log")).unwrap_or_default()
    );
    let listed = tls::sh(crictl(&sock).args(["images", "-q"]));
    assert!(!listed.trim().is_empty(), "{listed}");
}

/// `init --dry-run` (text) on `root`: (its exit code, standard output, standard error).
fn dry_run_text(root: &Path) -> (Option<i32>, String, String) {
    let cfg = config_with(root, "c.json", |v| v["tagging"] = json!({"enabled": false}));
    let out = init(root, &cfg, &["--dry-run"]);
    (out.status.code(), stdout(&out), stderr(&out))
}

/// The AMI's copy of the pause image (`ctr images export`, as the AL2023 AMI's build writes
/// `/etc/eks/pause.tar`) looked up in containerd's store by the digest its `index.json` records:
/// there, the plan says so; gone from the store, the run stops before any change.
#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn the_amis_pause_image_missing_from_the_store_stops_the_run() {
    if !(ready() && peer_present(&missing_commands(&["ctr", "go"]))) {
        return;
    }
    let cp = ControlPlane::shared();
    let program = pods::ensure_sandbox(&cp);
    let root = baked_root(&cp);
    let tar = root.path().join("etc/eks/pause.tar");
    std::fs::create_dir_all(tar.parent().unwrap()).unwrap();
    let export = |name: &str| {
        let _ = std::fs::remove_file(&tar);
        tls::sh(
            pods::ctr(&cp, "k8s.io")
                .args(["images", "export"])
                .arg(&tar)
                .arg(name),
        );
    };
    export(pods::SANDBOX_IMAGE);
    let (code, out, err) = dry_run_text(root.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("pause image: in containerd's store: yes (sha256:"),
        "{out}"
    );

    let work = tempfile::tempdir().unwrap();
    const GONE: &str = "eks-nodeinit.test/gone-pause:1";
    import(&cp, &program, work.path(), GONE);
    export(GONE);
    remove_every_name(&cp, GONE);
    let (code, _, err) = dry_run_text(root.path());
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("pause: nodeadm's pause image") && err.contains("no pod can start"),
        "{err}"
    );
}

/// AL2's pause image checked after the hand-off: the job `init` leaves runs the root's agent
/// (this build) through `complete-hook` with kubelet active, against the suite's containerd 2.
/// The image is labelled pinned and the step done; with the image gone the step fails naming
/// it, and so does the unit.
#[test]
#[ignore = "needs the control-plane peers: make control-plane"]
fn al2s_pause_image_is_pinned_and_checked_after_the_hand_off() {
    if !(ready() && peer_present(&missing_commands(&["ctr", "go"]))) {
        return;
    }
    let Some(bus) = super::join::bus_with_kubelet_active() else {
        return;
    };
    let cp = ControlPlane::shared();
    let program = pods::ensure_sandbox(&cp);
    let work = tempfile::tempdir().unwrap();
    const KEPT: &str = "eks-nodeinit.test/al2-pause:1";
    import(&cp, &program, work.path(), KEPT);
    let root = sample_root("al2-root");
    let r = root.path();
    // containerd's config as bootstrap.sh leaves it, naming KEPT; the packaged agent's path.
    std::fs::create_dir_all(r.join("etc/containerd")).unwrap();
    let own = std::fs::read_to_string(cp.dir.path().join("containerd/config.toml")).unwrap();
    let config = own.replace(pods::SANDBOX_IMAGE, KEPT);
    std::fs::write(r.join("etc/containerd/config.toml"), config).unwrap();
    std::fs::create_dir_all(r.join("usr/bin")).unwrap();
    std::os::unix::fs::symlink(bin(), r.join("usr/bin/eks-nodeinit")).unwrap();
    let cfg = config_with(r, "c.json", |v| {
        v["tagging"] = json!({"enabled": false});
        v["verify"] = json!({"join": "off"});
    });
    assert!(init(r, &cfg, &[]).status.success());
    let after = || {
        run(Command::new(bin())
            .args(["complete-hook", "--root"])
            .arg(r)
            .args(["--system-bus-address", &bus.address]))
    };
    let out = after();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = tls::sh(pods::ctr(&cp, "k8s.io").args(["images", "ls"]));
    let line = listed.lines().find(|l| l.starts_with(KEPT));
    assert!(
        line.is_some_and(|l| l.contains("io.cri-containerd.pinned=pinned")),
        "{listed}"
    );
    let rep = report(r);
    let step = "after the hand-off: the sandbox image in containerd's store, pinned";
    assert_eq!(report_outcome(&rep, step), Some(json!("done")), "{rep:#}");

    // The image gone: the step fails naming it (the program's error echoed, cut short).
    remove_every_name(&cp, KEPT);
    let out = after();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("after the hand-off, the sandbox image is not in containerd's store, pinned")
            && e.contains("holds no image named eks-nodeinit.test/al2-pa"),
        "{e}"
    );
}
