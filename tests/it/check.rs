//! `eks-nodeinit check` through the binary, on node image roots (no live kernel, no mounts:
//! judged by what their next boot sets and mounts) and on the example roots: each hardening
//! that would stop the node at boot is named with its cause and the command exits 1, the
//! build's cue to stop; an image as the EKS AMIs ship it exits 0. JSON for pipelines.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::common::{cmd, run, sample_root, stderr, stdout};

/// [`image`] with a hardening file after the AMI's: `kernel.panic = 0`.
fn hardened() -> tempfile::TempDir {
    let root = image();
    write(
        root.path(),
        "etc/sysctl.d/99-hardening.conf",
        "kernel.panic = 0\n",
    );
    root
}

/// The AL2023 example as a node image: no /proc/sys, the AMI's `99-amazon.conf`.
fn image() -> tempfile::TempDir {
    let root = sample_root("al2023-root");
    let r = root.path();
    std::fs::remove_dir_all(r.join("proc/sys")).unwrap();
    let ami = "vm.overcommit_memory=1\nkernel.panic=10\nkernel.panic_on_oops=1\n";
    write(r, "etc/sysctl.d/99-amazon.conf", ami);
    root
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn check(root: &Path, extra: &[&str]) -> Output {
    run(cmd()
        .arg("check")
        .arg("--root")
        .arg(root)
        .arg("--config")
        .arg(root.join("no-config.json"))
        .args(extra))
}

/// The line of the check named `name`.
fn line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no `{name}` in:\n{out}"))
}

#[test]
fn an_image_as_the_eks_amis_ship_it_and_the_example_roots_pass() {
    let root = image();
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let o = stdout(&out);
    assert!(o.starts_with("checks of the node (no config at "), "{o}");
    assert!(
        line(&o, "kernel settings protectKernelDefaults demands").starts_with("passed: "),
        "{o}"
    );
    // FIPS mode is the boot's kernel command line: not judged from an image root.
    let fips = line(&o, "FIPS endpoints in FIPS mode");
    assert!(fips.starts_with("not run: "), "{fips}");
    for example in ["al2023-root", "al2-root"] {
        let root = sample_root(example);
        let out = check(root.path(), &[]);
        assert_eq!(out.status.code(), Some(0), "{example}: {}", stdout(&out));
    }
}

#[test]
fn each_hardening_that_stops_the_node_at_boot_is_named_and_fails_the_build() {
    // kernel.panic 0 from a hardening file read after the AMI's, under protectKernelDefaults.
    let root = hardened();
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let o = stdout(&out);
    let l = line(&o, "kernel settings protectKernelDefaults demands");
    assert!(
        l.starts_with("failed: ") && l.contains("(kernel-defaults)"),
        "{l}"
    );
    assert!(
        l.contains("kernel.panic is 0 (/etc/sysctl.d/99-hardening.conf at boot), not 10; the kubelet's protectKernelDefaults is on"),
        "{l}"
    );
    assert!(
        stderr(&out).contains("1 check(s) or finding(s) of the node under"),
        "{}",
        stderr(&out)
    );

    // On the build instance (live values right), the file the build just added.
    let root = sample_root("al2023-root");
    write(
        root.path(),
        "etc/sysctl.d/99-hardening.conf",
        "kernel.panic = 0\n",
    );
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let o = stdout(&out);
    let l = line(&o, "kernel settings protectKernelDefaults demands");
    assert!(
        l.contains("kernel.panic is 0 (/etc/sysctl.d/99-hardening.conf at boot)"),
        "{l}"
    );

    // /var/lib/kubelet noexec in fstab.
    let root = image();
    let fstab =
        "UUID=1 / xfs defaults 0 0\n/dev/nvme1n1 /var/lib/kubelet xfs defaults,noexec 0 2\n";
    write(root.path(), "etc/fstab", fstab);
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let o = stdout(&out);
    let l = line(&o, "programs executable where the node runs them");
    let want = "/var/lib/kubelet is on the noexec mount /var/lib/kubelet";
    assert!(l.starts_with("failed: ") && l.contains(want), "{l}");

    // SELinux enforcing at boot, the policy without the container module; then with it.
    let root = image();
    let config = "SELINUX=enforcing\nSELINUXTYPE=targeted\n";
    write(root.path(), "etc/selinux/config", config);
    write(
        root.path(),
        "var/lib/selinux/targeted/active/modules/100/base/cil",
        "",
    );
    let out = check(root.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let o = stdout(&out);
    let l = line(&o, "SELinux and the container policy");
    assert!(
        l.contains("(selinux)") && l.contains("no `container` module"),
        "{l}"
    );
    let module = "var/lib/selinux/targeted/active/modules/200/container/cil";
    write(root.path(), module, "");
    assert_eq!(check(root.path(), &[]).status.code(), Some(0));
}

#[test]
fn the_json_output_has_each_check_and_how_many_failed() {
    let root = hardened();
    let out = check(root.path(), &["--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["failed"].as_u64()),
        (Some("Checks"), Some(1))
    );
    let checks = v["checks"].as_array().unwrap();
    let names: Vec<&str> = checks
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "kernel settings protectKernelDefaults demands",
            "programs executable where the node runs them",
            "SELinux and the container policy",
            "FIPS endpoints in FIPS mode"
        ],
        "{v:#}"
    );
    assert_eq!(checks[0]["cause"], "kernel-defaults");
    assert!(checks.iter().all(|c| c.get("ms").is_none()), "{v:#}");
}

#[test]
fn a_credential_provider_the_images_kubelet_refuses_is_a_finding_that_fails_the_build() {
    let root = image();
    let r = root.path();
    write(r, "etc/eks/kubelet-version.txt", "Kubernetes v1.33.1\n");
    let plugin = r.join("etc/eks/image-credential-provider/registry-token");
    write(r, "etc/eks/image-credential-provider/registry-token", "");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let provider = serde_json::json!({
        "name": "registry-token", "matchImages": ["registry.corp.example"],
        "defaultCacheDuration": "1h",
        "tokenAttributes": {"serviceAccountTokenAudience": "registry.corp.example",
                            "requireServiceAccount": true, "cacheType": "Token"}
    });
    let config = serde_json::json!({"cluster": {"name": "prod"},
        "kubelet": {"credentialProviders": [provider]}});
    let cfg = r.join("config.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    let out = run(cmd()
        .args(["check", "--root"])
        .arg(r)
        .arg("--config")
        .arg(&cfg));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let o = stdout(&out);
    let l = line(
        &o,
        "finding: kubelet.credentialProviders[0].tokenAttributes",
    );
    assert!(l.contains("the node's kubelet (kubelet v1.33.1"), "{l}");
    // The image's kubelet takes them from 1.34 on.
    write(r, "etc/eks/kubelet-version.txt", "Kubernetes v1.34.2\n");
    let out = run(cmd()
        .args(["check", "--root"])
        .arg(r)
        .arg("--config")
        .arg(&cfg));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
