//! The processes a test starts: killed when dropped, found missing (a note on a developer box, a
//! failure in CI), on a free loopback port, waited for, logging to a file.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed and reaped when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a peer the suite starts is installed: true, else a note and false on a developer box;
/// in CI its absence fails the test. `missing` names what is not there (empty: all present).
pub fn peer_present(missing: &[&str]) -> bool {
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{missing:?} required in CI (make deps)"
    );
    eprintln!("SKIP: {missing:?} not installed (run `make deps`)");
    false
}

/// The commands of `tools` that cannot be run (`<tool> --version` fails to start).
pub fn missing_commands<'a>(tools: &[&'a str]) -> Vec<&'a str> {
    tools
        .iter()
        .copied()
        .filter(|t| Command::new(t).arg("--version").output().is_err())
        .collect()
}

/// A TCP port free on 127.0.0.1 at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait until `ok` (at most 30 s), else fail naming `what`.
pub fn wait_for(what: &str, ok: impl Fn() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `c` started with its output in `log`.
pub fn logged(mut c: Command, log: &Path) -> Proc {
    let f = std::fs::File::create(log).unwrap();
    Proc(
        c.stdout(f.try_clone().unwrap())
            .stderr(f)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// The first line a started child writes on its piped standard output (where a peer prints its
/// port or address), without its line end.
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    let out = child
        .stdout
        .take()
        .expect("the child's standard output is piped");
    std::io::BufReader::new(out).read_line(&mut line).unwrap();
    line.trim_end().to_string()
}
