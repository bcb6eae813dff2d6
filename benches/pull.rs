//! Image pulls, side by side in one run, from the suite's docker-registry, over loopback and
//! through the shaping front (benches/pull/front.rs: a round-trip time per connection and per
//! exchange, and a bandwidth limit per connection, in user space), every row and its floor
//! over the same network:
//!
//! * containerd 2 (the peers' build) pulling through its CRI with `crictl pull`, as a kubelet
//!   asks, once per mode below: the node's defaults (AL2023's images section), and the pull
//!   profiles. Each run starts a containerd of its own on a fresh root (empty content store, no
//!   snapshots) and times the pull alone;
//! * containerd 2 the same way with SOCI's snapshotter (the peers' `soci-snapshotter-grpc`) as a
//!   proxy snapshotter in its parallel pull mode, nodeadm's FastImagePull: a daemon of its own
//!   each run, its root under the run's directory, stopped after. Without the binary its row is
//!   left out and the bench prints SKIP and why;
//! * the floor: this process fetching the same manifest, then the config and every layer at once
//!   (one thread and one connection each, a minimal HTTP/1.1 GET), each blob's sha256 checked
//!   and written to its own file, fsync'd, as containerd's content store writes and syncs them;
//! * the floor with the unpack, two ways: each layer also piped as it arrives into `tar -xzf`
//!   (GNU tar and gzip) into a directory of its own, all layers at once; or, as containerd
//!   applies layers (each on its parent, one at a time by default), `tar -xzf` of each layer's
//!   file in the manifest's order once it has arrived, the fetches still all at once. The
//!   unpacked files are not fsync'd (containerd's default, `image_pull_with_sync_fs = false`).
//!
//! The image: `PULL_LAYERS` (`COUNTxMIB`, default 8x8) layers of random bytes (incompressible:
//! the gzip'd layers are as large as their files), pushed once by tests/registry/push_image.py.
//! `PULL_RUNS` rounds (default 5), every mode once a round, each round starting with the next
//! mode; `PULL_MODES` (comma-separated names) runs a part of the containerd modes; `PULL_DIR`
//! is where the roots go (default the temp dir: the same file system for every mode);
//! `PULL_SHAPES` the networks, one table each (default `loopback,2ms@50,20ms@20`: loopback, a
//! registry in the Region with 2 ms round trips and 50 MB/s a connection, one farther away with
//! 20 ms and 20 MB/s). containerd reaches the registry through the front by its `hosts.toml`,
//! SOCI's snapshotter by a mirror in its resolver config, the floor at the front's port.
//! Needs root and the peers' containerd and crictl (`make peers-k8s`); without them it says so
//! and stops (and fails when `CI` is set). SOCI's row alone is left out, with a SKIP line, when
//! its daemon is not built. Run: `cargo bench --bench pull`; CI runs it once on a
//! small image (`make bench-smoke`).

#[path = "pull/front.rs"]
mod front;

// The integration suites' shared helpers, of which the bench uses a part.
#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::control_plane::peers_bin;
use common::peers::Proc;
use sha2::{Digest, Sha256};

const REPO: &str = "bench/layers";
const TAG: &str = "1";

/// One way containerd is configured: lines for the CRI images plugin's table and for the
/// transfer service's (empty: the table left out), the path the CRI then pulls by, and whether
/// SOCI's snapshotter is its snapshotter.
struct Mode {
    name: &'static str,
    cri: &'static str,
    transfer: &'static str,
    path: &'static str,
    soci: bool,
}

/// containerd 2.3 pulls through its transfer service unless the CRI's config holds a setting
/// the transfer service lacks (`discard_unpacked_layers = true`, which AL2023's nodeadm writes,
/// or `max_concurrent_downloads` other than 3): then the CRI pulls itself, with its own
/// settings, and the transfer service's are not read (`CheckLocalImagePullConfigs`).
const MODES: [Mode; 6] = [
    Mode {
        name: "defaults",
        cri: "discard_unpacked_layers = true",
        transfer: "",
        path: "CRI local pull: 3 downloads, one stream a layer",
        soci: false,
    },
    Mode {
        name: "profile-cri",
        cri: "discard_unpacked_layers = true\nmax_concurrent_downloads = 8",
        transfer: "",
        path: "CRI local pull: 8 downloads",
        soci: false,
    },
    Mode {
        name: "profile-cri-chunked",
        cri: "discard_unpacked_layers = true\nmax_concurrent_downloads = 8\nconcurrent_layer_fetch_buffer = 1048576",
        transfer: "",
        path: "CRI local pull: 8 downloads, 1 MiB ranges in parallel",
        soci: false,
    },
    Mode {
        name: "transfer",
        cri: "discard_unpacked_layers = false",
        transfer: "",
        path: "transfer service, its defaults: 3 downloads, 1 unpack",
        soci: false,
    },
    Mode {
        name: "transfer-unpacks",
        cri: "discard_unpacked_layers = false",
        transfer: "max_concurrent_unpacks = 4",
        path: "transfer service: 3 downloads, 4 unpacks",
        soci: false,
    },
    Mode {
        name: "profile-transfer",
        cri: "discard_unpacked_layers = false",
        transfer: "max_concurrent_downloads = 8\nmax_concurrent_unpacks = 4",
        path: "transfer service: 8 downloads, 4 unpacks",
        soci: false,
    },
];

/// containerd with SOCI's snapshotter in its parallel pull mode, as nodeadm writes it for
/// FastImagePull: the CRI prepares each layer's snapshot with its annotations, and the
/// snapshotter fetches and unpacks the layer itself.
static SOCI: Mode = Mode {
    name: "soci-parallel",
    cri: "discard_unpacked_layers = true\nsnapshotter = \"soci\"\ndisable_snapshot_annotations = false",
    transfer: "",
    path: "SOCI parallel pull: 20 downloads an image, 16 MiB ranges, 12 unpacks",
    soci: true,
};

/// SOCI's daemon, built by `make peers-k8s`.
const SOCI_BIN: &str = "soci-snapshotter-grpc";

/// The daemon's config: nodeadm's FastImagePull values for the parallel pull mode.
const SOCI_CONFIG: &str = "[pull_modes.parallel_pull_unpack]
enable = true
max_concurrent_downloads = -1
max_concurrent_downloads_per_image = 20
concurrent_download_chunk_size = \"16mb\"
max_concurrent_unpacks = -1
max_concurrent_unpacks_per_image = 12
discard_unpacked_layers = true
";

/// SOCI's daemon for one run, its config and root under `d/soci`, serving at `sock`, reading
/// the image's manifest from the content store of the containerd at `containerd`, fetching
/// through `net`; once `sock` is there. Stopped when dropped.
fn soci_daemon(d: &Path, sock: &Path, containerd: &Path, net: &Net) -> Proc {
    let s = d.join("soci");
    std::fs::create_dir_all(&s).unwrap();
    let cfg = s.join("config.toml");
    let mut store = format!(
        "[content_store]\ncontainerd_address = \"{}\"\n",
        containerd.display()
    );
    // SOCI's parallel pull fetches the layers itself from the image's own host (a registry
    // mirror is not read there, v0.16.1 `fs.preloadAllLayers`), which is the front when there
    // is one: plain HTTP, as this entry says.
    store.push_str(&format!(
        "[[resolver.host.\"127.0.0.1:{via}\".mirrors]]\nhost = \"http://127.0.0.1:{via}\"\ninsecure = true\n",
        via = net.via
    ));
    std::fs::write(&cfg, format!("{SOCI_CONFIG}{store}")).unwrap();
    let mut cmd = Command::new(peers_bin().join(SOCI_BIN));
    cmd.arg("--config").arg(&cfg);
    cmd.arg("--root").arg(s.join("root"));
    cmd.arg("--address").arg(sock);
    cmd.args(["--log-level", "warn"]);
    let log = s.join("soci.log");
    let proc = common::control_plane::tied(cmd, &log);
    let up = common::control_plane::wait_until(Duration::from_secs(30), || sock.exists());
    assert!(
        up,
        "{SOCI_BIN}: no socket after 30 s; its log: {}",
        log.display()
    );
    proc
}

/// The CRI images plugin's and transfer service's tables for `mode`, hosts under `hosts`
/// (nodeadm's `config_path` moved there), and SOCI's proxy snapshotter at `soci` when there is
/// one. Nothing here pulls the sandbox image.
fn images_toml(mode: &Mode, hosts: &Path, soci: Option<&Path>) -> String {
    let mut t = format!(
        "[plugins.'io.containerd.cri.v1.images']\n{}\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"localhost/kubernetes/pause\"\n[plugins.'io.containerd.cri.v1.images'.registry]\n  config_path = \"{}\"\n",
        mode.cri,
        hosts.display()
    );
    if !mode.transfer.is_empty() {
        t.push_str(&format!(
            "[plugins.'io.containerd.transfer.v1.local']\n{}\n",
            mode.transfer
        ));
    }
    if let Some(sock) = soci {
        t.push_str(&format!(
            "[proxy_plugins.soci]\n  type = \"snapshot\"\n  address = \"{}\"\n",
            sock.display()
        ));
    }
    t
}

/// The `hosts.toml` for containerd of the registry at `via` (its own port, or the shaping
/// front's): plain HTTP on loopback.
fn write_hosts(dir: &Path, via: u16) {
    let host = dir.join(format!("127.0.0.1:{via}"));
    std::fs::create_dir_all(&host).unwrap();
    let toml = format!("server = \"http://127.0.0.1:{via}\"\n");
    std::fs::write(host.join("hosts.toml"), toml).unwrap();
}

fn crictl(sock: &Path) -> Command {
    let ep = format!("unix://{}", sock.display());
    let mut c = Command::new(peers_bin().join("crictl"));
    c.args(["--runtime-endpoint", &ep, "--image-endpoint", &ep])
        .args(["--timeout", "600s"])
        .stdin(Stdio::null());
    c
}

fn run_ok(c: &mut Command, what: &str) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// CPU seconds `pid` has used (user + system; with `children`, also its reaped children's), from
/// `/proc/PID/stat` in USER_HZ (100 a second on Linux whatever the kernel's tick).
fn cpu(pid: u32, children: bool) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<f64> = after
        .split(' ')
        .skip(11)
        .take(4)
        .map(|x| x.parse().unwrap())
        .collect();
    let ticks: f64 = if children {
        f.iter().sum()
    } else {
        f[0] + f[1]
    };
    ticks / 100.0
}

/// One run's wall time and the CPU seconds the puller used in it.
struct Sample {
    wall: Duration,
    cpu: f64,
}

/// One pull by a fresh containerd in `mode` (and a fresh SOCI daemon when the mode has one): the
/// time `crictl pull` took, and the CPU of containerd and of SOCI's daemon.
fn containerd_pull(mode: &Mode, base: &Path, net: &Net, image: &str) -> Sample {
    let dir = tempfile::Builder::new()
        .prefix("pull-containerd")
        .tempdir_in(base)
        .unwrap();
    let d = dir.path();
    let soci_sock = d.join("soci").join("soci.sock");
    let images = images_toml(mode, &net.hosts, mode.soci.then_some(soci_sock.as_path()));
    let (cfg, sock) = common::containerd::containerd_config(d, &images);
    let soci = mode.soci.then(|| soci_daemon(d, &soci_sock, &sock, net));
    let proc = common::containerd::start_containerd_with(d, &cfg, &sock);
    let pids: Vec<u32> = std::iter::once(&proc)
        .chain(soci.as_ref())
        .map(|p| p.0.id())
        .collect();
    let used = || pids.iter().map(|p| cpu(*p, false)).sum::<f64>();
    // Its image service answering before the clock starts.
    let ready = common::control_plane::wait_until(Duration::from_secs(30), || {
        crictl(&sock)
            .arg("images")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(ready, "containerd ({}): the CRI does not answer", mode.name);
    let (t, c) = (Instant::now(), used());
    run_ok(crictl(&sock).args(["pull", image]), mode.name);
    let wall = t.elapsed();
    let cpu = used() - c;
    drop(proc);
    drop(soci);
    Sample { wall, cpu }
}

/// A blob of the image: its digest and whether it is a layer (the config is not).
struct Blob {
    digest: String,
    layer: bool,
}

/// `GET path` on the registry (HTTP/1.1, one connection, closed after): the status, and the body
/// handed to `sink` as it arrives.
fn get(port: u16, path: &str, accept: &str, mut sink: impl FnMut(&[u8])) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = vec![0u8; 256 * 1024];
    let mut head = Vec::new();
    let status = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "GET {path}: the connection closed in the headers");
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let line = String::from_utf8_lossy(&head[..end]).into_owned();
            sink(&head[end + 4..]);
            break line
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
        }
    };
    loop {
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            return status;
        }
        sink(&buf[..n]);
    }
}

const MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// The image's manifest, read as containerd resolves it: its config and layers.
fn manifest(port: u16) -> Vec<Blob> {
    let mut body = Vec::new();
    let path = format!("/v2/{REPO}/manifests/{TAG}");
    let status = get(port, &path, MANIFEST, |b| body.extend_from_slice(b));
    assert_eq!(
        status,
        200,
        "the manifest: {}",
        String::from_utf8_lossy(&body)
    );
    let m: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let blob = |v: &serde_json::Value, layer| Blob {
        digest: v["digest"].as_str().unwrap().to_string(),
        layer,
    };
    let mut blobs = vec![blob(&m["config"], false)];
    blobs.extend(
        m["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| blob(l, true)),
    );
    blobs
}

/// How the floor unpacks the layers: not at all, each as it arrives (all at once), or one at a
/// time in the manifest's order as each has arrived (as containerd applies layers, each on its
/// parent, with one unpack at a time).
#[derive(Clone, Copy, PartialEq)]
enum Unpack {
    No,
    AsTheyArrive,
    InOrder,
}

/// `tar -xzf SOURCE -C dir/layers/<hex>` (SOURCE `-`: its stdin, piped).
fn untar(dir: &Path, hex: &str, source: &Path) -> std::process::Child {
    let out = dir.join("layers").join(hex);
    std::fs::create_dir_all(&out).unwrap();
    Command::new("tar")
        .arg("-xzf")
        .arg(source)
        .arg("-C")
        .arg(&out)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One blob into `dir/blobs/<hex>` (sha256 checked, fsync'd); a layer also piped into `untar`
/// as it arrives when `unpack`.
fn fetch(port: u16, blob: &Blob, dir: &Path, unpack: bool) {
    let hex = blob.digest.trim_start_matches("sha256:");
    let mut file = std::fs::File::create(dir.join("blobs").join(hex)).unwrap();
    let mut tar = (unpack && blob.layer).then(|| untar(dir, hex, Path::new("-")));
    let mut sha = Sha256::new();
    let path = format!("/v2/{REPO}/blobs/{}", blob.digest);
    let status = get(port, &path, "*/*", |b| {
        sha.update(b);
        file.write_all(b).unwrap();
        if let Some(t) = tar.as_mut() {
            t.stdin.as_mut().unwrap().write_all(b).unwrap();
        }
    });
    assert_eq!(status, 200, "GET {path}");
    assert_eq!(format!("sha256:{:x}", sha.finalize()), blob.digest);
    file.sync_all().unwrap();
    if let Some(mut t) = tar {
        drop(t.stdin.take());
        assert!(t.wait().unwrap().success(), "tar -x of {hex}");
    }
}

/// The floor: the manifest, then every blob at once (`fetch`), in a fresh directory; the CPU of
/// this process and its `tar`s.
fn floor(port: u16, base: &Path, unpack: Unpack) -> Sample {
    let dir = tempfile::Builder::new()
        .prefix("pull-floor")
        .tempdir_in(base)
        .unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("blobs")).unwrap();
    let (t, c) = (Instant::now(), cpu(std::process::id(), true));
    let blobs = manifest(port);
    let piped = unpack == Unpack::AsTheyArrive;
    std::thread::scope(|s| {
        let fetched: Vec<_> = blobs
            .iter()
            .map(|b| s.spawn(move || fetch(port, b, d, piped)))
            .collect();
        for (b, f) in blobs.iter().zip(fetched) {
            f.join().unwrap();
            if unpack == Unpack::InOrder && b.layer {
                let hex = b.digest.trim_start_matches("sha256:");
                let blob = d.join("blobs").join(hex);
                assert!(untar(d, hex, &blob).wait().unwrap().success());
            }
        }
    });
    std::fs::File::open(d.join("blobs"))
        .unwrap()
        .sync_all()
        .unwrap();
    let wall = t.elapsed();
    let used = cpu(std::process::id(), true) - c;
    Sample { wall, cpu: used }
}

/// What the bench needs that is not here; empty when it can run.
fn missing() -> Vec<String> {
    let mut m: Vec<String> = ["containerd", "containerd-shim-runc-v2", "crictl"]
        .iter()
        .filter(|b| !peers_bin().join(b).exists())
        .map(|b| format!("{b} (make peers-k8s)"))
        .collect();
    m.extend(
        common::missing_commands(&["docker-registry", "tar"])
            .iter()
            .map(|c| format!("{c} (make deps)")),
    );
    if !nix::unistd::Uid::effective().is_root() {
        m.push("root".into());
    }
    m
}

/// The image's layers' bytes, from `PULL_LAYERS` (`COUNTxMIB`).
fn layer_bytes() -> u64 {
    let layers = env_or("PULL_LAYERS", "8x8");
    let (n, mib) = layers.split_once('x').expect("PULL_LAYERS: COUNTxMIB");
    let count = |s: &str| s.parse::<u64>().expect("PULL_LAYERS: COUNTxMIB");
    (count(n) * count(mib)) << 20
}

fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// One row's runs, in the order run: the sample and the registry's CPU seconds in it.
struct Row {
    name: String,
    path: String,
    runs: Vec<(Sample, f64)>,
}

/// (median, min, max) of `v`.
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// A row's wall times in seconds, the puller's CPU seconds, the registry's.
fn columns(r: &Row) -> [Vec<f64>; 3] {
    [
        r.runs.iter().map(|(s, _)| s.wall.as_secs_f64()).collect(),
        r.runs.iter().map(|(s, _)| s.cpu).collect(),
        r.runs.iter().map(|(_, reg)| *reg).collect(),
    ]
}

fn print_table(rows: &[Row], layers: &str, runs: usize, over: &str) {
    let floor = stats(columns(&rows[rows.len() - FLOORS.len()])[0].clone()).0;
    println!(
        "\nover {over}; image: {layers} (layers x MiB, random bytes, gzip'd), {runs} runs each, interleaved; seconds, CPU in CPU-seconds (median)"
    );
    println!("| mode | how it pulls | median | min–max | median / floor | puller's CPU | registry's CPU |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let [wall, cpu, reg] = columns(r);
        let (med, lo, hi) = stats(wall);
        println!(
            "| {} | {} | {med:.3} | {lo:.3}–{hi:.3} | {:.2}× | {:.2} | {:.2} |",
            r.name,
            r.path,
            med / floor,
            stats(cpu).0,
            stats(reg).0
        );
    }
}

/// The containerd modes `PULL_MODES` names (all by default); SOCI's only when its daemon is
/// there, else a SKIP line saying why its row is left out.
fn modes() -> Vec<&'static Mode> {
    let chosen = std::env::var("PULL_MODES").ok();
    let wanted = |m: &Mode| {
        chosen
            .as_deref()
            .map_or(true, |c| c.split(',').any(|n| n == m.name))
    };
    let mut picked: Vec<&Mode> = MODES.iter().filter(|m| wanted(m)).collect();
    if wanted(&SOCI) {
        let bin = peers_bin().join(SOCI_BIN);
        if bin.exists() {
            picked.push(&SOCI);
        } else {
            println!(
                "SKIP: the {} row: {} is not there (make peers-k8s)",
                SOCI.name,
                bin.display()
            );
        }
    }
    assert!(
        !picked.is_empty(),
        "PULL_MODES names none of the modes here"
    );
    picked
}

/// The networks the rows run over, from `PULL_SHAPES` (comma-separated: `loopback`, or
/// `RTTms@MBps` for the shaping front); by default loopback, then a registry in the Region and
/// one farther away.
fn shapes() -> Vec<Option<front::Shape>> {
    env_or("PULL_SHAPES", "loopback,2ms@50,20ms@20")
        .split(',')
        .map(|s| match s {
            "loopback" => None,
            s => Some(front::Shape::parse(s).unwrap_or_else(|e| panic!("PULL_SHAPES: {e}"))),
        })
        .collect()
}

/// Where the pulls go: the port they reach the registry at (the image is named by it, so that
/// every puller goes there), the hosts directory that says so.
struct Net {
    via: u16,
    hosts: PathBuf,
    /// The front's count of bytes passed from the registry (none over plain loopback).
    relayed: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

fn main() {
    let missing = missing();
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the pull bench needs {missing:?}"
        );
        println!("SKIP: the pull bench needs {missing:?}");
        return;
    }
    let runs: usize = env_or("PULL_RUNS", "5")
        .parse()
        .expect("PULL_RUNS: a count");
    let layers = env_or("PULL_LAYERS", "8x8");
    let base = PathBuf::from(env_or(
        "PULL_DIR",
        &std::env::temp_dir().display().to_string(),
    ));
    let work = tempfile::Builder::new()
        .prefix("pull-bench")
        .tempdir_in(&base)
        .unwrap();
    let (registry, port, _log) = common::registry::start_plain(work.path());
    let url = format!("http://127.0.0.1:{port}");
    common::registry::push_layers(&url, REPO, TAG, &layers);
    let modes = modes();
    for shape in shapes() {
        let front = shape.map(|s| front::Front::start(port, s));
        let via = front.as_ref().map_or(port, |f| f.port);
        let image = format!("127.0.0.1:{via}/{REPO}:{TAG}");
        let hosts = work.path().join(format!("hosts-{via}"));
        write_hosts(&hosts, via);
        let relayed = front.as_ref().map(|f| f.relayed.clone());
        let net = Net {
            via,
            hosts,
            relayed,
        };
        let rows = bench(&modes, &net, &base, &image, runs, registry.0.id());
        let over = shape.map_or("loopback, no shaping".into(), |s| s.label());
        print_table(&rows, &layers, runs, &over);
    }
}

/// Every row over `net`, `runs` rounds, each round starting with the next row.
fn bench(
    modes: &[&Mode],
    net: &Net,
    base: &Path,
    image: &str,
    runs: usize,
    registry: u32,
) -> Vec<Row> {
    let mut rows = rows(modes);
    let n = rows.len();
    let image_bytes = layer_bytes();
    let run = |i: usize| match i.checked_sub(modes.len()) {
        None => containerd_pull(modes[i], base, net, image),
        Some(k) => floor(net.via, base, FLOORS[k].2),
    };
    // Warm-up: the registry's blobs in the page cache, containerd's binary loaded.
    run(0);
    run(n - FLOORS.len());
    let relayed = || {
        net.relayed
            .as_ref()
            .map(|r| r.load(std::sync::atomic::Ordering::Relaxed))
    };
    for round in 0..runs {
        for k in 0..n {
            let i = (round + k) % n;
            let (c, b) = (cpu(registry, false), relayed());
            let sample = run(i);
            rows[i].runs.push((sample, cpu(registry, false) - c));
            // Every row's image came through the front, not around it.
            if let (Some(b), Some(a)) = (b, relayed()) {
                let got = a - b;
                assert!(
                    got >= image_bytes,
                    "{}: {got} bytes through the front, less than the image's {image_bytes}",
                    rows[i].name
                );
            }
        }
    }
    rows
}

/// The floor's rows: the floor itself first (the others are multiples of it).
const FLOORS: [(&str, &str, Unpack); 3] = [
    ("floor", "parallel GETs, sha256, fsync'd files", Unpack::No),
    (
        "floor+unpack",
        "the floor, each layer piped into tar -xzf as it arrives",
        Unpack::AsTheyArrive,
    ),
    (
        "floor+ordered unpack",
        "the floor, then tar -xzf of each layer in order once it is there",
        Unpack::InOrder,
    ),
];

/// A row for each containerd mode, then the floor's.
fn rows(modes: &[&Mode]) -> Vec<Row> {
    let row = |name: &str, path: &str| Row {
        name: name.into(),
        path: path.into(),
        runs: vec![],
    };
    let mut rows: Vec<Row> = modes.iter().map(|m| row(m.name, m.path)).collect();
    rows.extend(FLOORS.iter().map(|(name, path, _)| row(name, path)));
    rows
}
