//! Sample node roots (temp copies of examples/*-root), their files as bytes, and bootstrap.sh
//! stand-ins with the real script's option grammar that record how they were called.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::manifest_dir;

pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// A temp copy of one of the sample node roots under examples/.
pub fn sample_root(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&manifest_dir().join("examples").join(name), d.path());
    d
}

/// The options of the newest AL2 bootstrap.sh, each taking one value (checked against every
/// upstream release's script; `--service-ipv4-cidr` is the newest, 2025-05).
pub const BOOTSTRAP_OPTIONS: &[&str] = &eks_nodeinit::plan::handoff::al2::NEWEST_OPTIONS;

/// A bootstrap.sh stand-in with the real script's option grammar (a `while`/`case $key in` loop:
/// each option takes the next word, `-h | --help` exits 1, other words are positional, `$2` under
/// `set -o nounset`) for `options`; `record` (shell) runs first with the argv untouched.
pub fn bootstrap_standin(options: &[&str], record: &str) -> String {
    let mut s = String::from(
        "#!/bin/bash\n# Stand-in for the EKS AL2 AMI's /etc/eks/bootstrap.sh: its option grammar, no node setup.\nset -o nounset\n",
    );
    s.push_str(record);
    s.push_str("\nPOSITIONAL=()\nwhile [[ $# -gt 0 ]]; do\n  key=\"$1\"\n  case $key in\n    -h | --help)\n      echo \"usage: $0 [options] <cluster-name>\"\n      exit 1\n      ;;\n");
    for o in options {
        s.push_str(&format!(
            "    {o})\n      VALUE=\"$2\"\n      shift\n      shift\n      ;;\n"
        ));
    }
    s.push_str("    *)\n      POSITIONAL+=(\"$1\")\n      shift\n      ;;\n  esac\ndone\n");
    s.push_str(STANDIN_EVIDENCE);
    s
}

/// What every real bootstrap.sh does once past its options, and the agent reads as proof that
/// the hand-off happened (`eks_nodeinit::os::marker::EVIDENCE`): it rewrites the cluster CA file
/// (`/etc/kubernetes/pki/ca.crt`, beside the script's `/etc/eks`, so under a test root too).
pub const STANDIN_EVIDENCE: &str = "pki=\"$(dirname \"$0\")/../kubernetes/pki\"\nmkdir -p \"$pki\"\necho stand-in > \"$pki/ca.crt\"\n";

/// Install `script` as the root's bootstrap.sh (mode 0755).
pub fn install_bootstrap(root: &Path, script: &str) -> PathBuf {
    let p = root.join("etc/eks/bootstrap.sh");
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The shell that records the argv, one word per line, in `argv.txt` beside the script.
pub const RECORD_ARGV: &str = "out=\"$(dirname \"$0\")/argv.txt\"\n: > \"$out\"\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$out\"; done\n";

/// Replace bootstrap.sh with a stand-in (the newest option grammar) that records its argv, one
/// word per line, in `argv.txt` beside it.
pub fn recording_bootstrap(root: &Path) -> PathBuf {
    install_bootstrap(root, &bootstrap_standin(BOOTSTRAP_OPTIONS, RECORD_ARGV));
    root.join("etc/eks/argv.txt")
}

/// The shell that appends one line per call to `calls.log` beside the script: how many times
/// bootstrap.sh was exec'd.
pub const RECORD_CALL: &str = "echo call >> \"$(dirname \"$0\")/calls.log\"\n";

/// Replace bootstrap.sh with a stand-in (the newest option grammar) that appends a line per call
/// to `calls.log` and records its argv in `argv.txt`, both beside it, then runs `then` (shell,
/// e.g. `sleep 0.3`) before reading its options.
pub fn counting_bootstrap(root: &Path, then: &str) -> PathBuf {
    let record = format!("{RECORD_CALL}{RECORD_ARGV}{then}\n");
    install_bootstrap(root, &bootstrap_standin(BOOTSTRAP_OPTIONS, &record));
    root.join("etc/eks/calls.log")
}

/// Every regular file under `root` and its bytes, but the run lock: it is taken before the node
/// is read (exactly one run plans and applies), and holding it changes nothing on the node.
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = snapshot_as_is(root);
    // A file naming the root (the steps after the hand-off run the root's agent with --root)
    // is the same node's whatever the root's temporary name.
    let name = root.display().to_string();
    for content in m.values_mut() {
        if let Ok(text) = std::str::from_utf8(content) {
            if text.contains(&name) {
                *content = text.replace(&name, "<root>").into_bytes();
            }
        }
    }
    m
}

/// Every file under `root` with its bytes, by its path under the root (the run lock aside).
fn snapshot_as_is(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, m: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, m);
            } else if e.file_type().unwrap().is_file() {
                m.insert(
                    p.strip_prefix(base).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    walk(root, root, &mut m);
    m.remove(Path::new("run/lock/eks-nodeinit.lock"));
    m
}
