//! Threads inside a network namespace: a thread that has joined one (`setns`) binds and dials
//! there, and so does every thread it starts (a tokio runtime's workers). How the in-process
//! peers (the IMDS server) live beside the control plane.

use std::path::Path;

/// Move the calling thread into the network namespace `netns` (`/proc/PID/ns/net`).
pub fn enter(netns: &Path) {
    let f = std::fs::File::open(netns).unwrap();
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns (root needed)");
}

/// Run `f` on a thread in `netns` and give back what it returns.
pub fn run_in<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = netns.to_path_buf();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
    .join()
    .unwrap()
}

/// Whether something listens on 127.0.0.1:`port` in `netns`.
pub fn listening(netns: &Path, port: u16) -> bool {
    accepts(netns, "127.0.0.1", port)
}

/// Whether something accepts connections on `addr`:`port` in `netns`.
pub fn accepts(netns: &Path, addr: &str, port: u16) -> bool {
    let addr = addr.to_string();
    run_in(netns, move || {
        std::net::TcpStream::connect((addr.as_str(), port)).is_ok()
    })
}

/// A free port on 127.0.0.1 in `netns`.
pub fn free_port(netns: &Path) -> u16 {
    run_in(netns, || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
}

/// A mount namespace whose /etc/hosts maps each `(address, names)` of `hosts` (beside
/// localhost), held by a process in `netns` that dies with the test process: (the holder,
/// `/proc/PID/ns/mnt`). Programs run there by `nsenter --net --mount` resolve those names so.
pub fn hosts_namespace(
    dir: &Path,
    netns: &Path,
    hosts: &[(&str, &str)],
) -> (super::peers::Proc, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("hosts");
    let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (addr, names) in hosts {
        text.push_str(&format!("{addr} {names}\n"));
    }
    std::fs::write(&file, text).unwrap();
    let mut c = super::control_plane::in_netns(netns, "unshare");
    c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/hosts && exec sleep infinity"#)
        .arg(&file);
    let holder = super::control_plane::tied(c, &dir.join("names.log"));
    let pid = holder.0.id();
    // `sleep` once the bind mount is made (nsenter, unshare and sh exec each other).
    super::control_plane::wait_long(
        "the names' mount namespace",
        std::time::Duration::from_secs(10),
        || std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep"),
    );
    (
        holder,
        std::path::PathBuf::from(format!("/proc/{pid}/ns/mnt")),
    )
}
