//! The shaping front: a TCP relay on loopback between a puller and the registry that gives each
//! connection what a network has and loopback lacks, in user space (this kernel has no
//! tc/netem): a round-trip time, paid once for the connection's handshake and once for every
//! exchange (half of it on each direction's bytes), and a bandwidth limit per connection on what
//! the registry sends, as a registry or a CDN caps one TCP stream. What concurrent downloads beat
//! on a real registry is exactly these two; over plain loopback they cost nothing.
//!
//! Each direction of a connection is a delay line: a reader stamps every chunk with when it may
//! leave (its arrival plus half the round trip), a writer sends it then, no sooner than the
//! limit allows after the chunk before. A connection costs four threads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// What the front adds to a connection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub rtt: Duration,
    /// The most bytes a second one connection carries from the registry.
    pub bytes_per_sec: u64,
}

impl Shape {
    /// `RTTms@MBps`, e.g. `20ms@20`: 20 ms round trips, 20 MB/s (10^6 bytes) a connection.
    pub fn parse(s: &str) -> Result<Shape, String> {
        let (rtt, rate) = s
            .split_once('@')
            .ok_or_else(|| format!("`{s}` is not RTTms@MBps"))?;
        let ms: u64 = rtt
            .strip_suffix("ms")
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| format!("`{rtt}` is not a round trip in ms"))?;
        let mb: u64 = rate
            .parse()
            .ok()
            .filter(|m| *m > 0)
            .ok_or_else(|| format!("`{rate}` is not MB/s above 0"))?;
        Ok(Shape {
            rtt: Duration::from_millis(ms),
            bytes_per_sec: mb * 1_000_000,
        })
    }

    pub fn label(&self) -> String {
        format!(
            "{} ms RTT, {} MB/s a connection",
            self.rtt.as_millis(),
            self.bytes_per_sec / 1_000_000
        )
    }
}

/// The front, listening on `port` until dropped.
pub struct Front {
    pub port: u16,
    /// The bytes it has passed from the registry, all connections together.
    pub relayed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Drop for Front {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Front {
    /// A front before the server at 127.0.0.1:`upstream`.
    pub fn start(upstream: u16, shape: Shape) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let relayed = Arc::new(AtomicU64::new(0));
        let (stopped, counted) = (stop.clone(), relayed.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let counted = counted.clone();
                thread::spawn(move || relay(client, upstream, shape, &counted));
            }
        });
        Front {
            port,
            relayed,
            stop,
        }
    }
}

/// One connection: the handshake's round trip, then both directions through their delay lines,
/// the registry's side limited.
fn relay(client: TcpStream, upstream: u16, shape: Shape, relayed: &AtomicU64) {
    thread::sleep(shape.rtt);
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    for s in [&client, &server] {
        let _ = s.set_nodelay(true);
    }
    let half = shape.rtt / 2;
    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let up = thread::spawn(move || line(c2, s2, half, None, None));
    line(
        server,
        client,
        half,
        Some(shape.bytes_per_sec),
        Some(relayed),
    );
    let _ = up.join();
}

/// One direction: `from`'s bytes to `to`, each chunk `delay` after it arrived and, with a
/// `rate`, no sooner than that many bytes a second allow; counted into `relayed`.
fn line(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    rate: Option<u64>,
    relayed: Option<&AtomicU64>,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let reader = thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let mut free = Instant::now();
    for (due, chunk) in rx {
        let at = due.max(free);
        let now = Instant::now();
        if at > now {
            thread::sleep(at - now);
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
        if let Some(r) = relayed {
            r.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        if let Some(r) = rate {
            let nanos = (chunk.len() as u128 * 1_000_000_000 / u128::from(r)) as u64;
            free = at.max(Instant::now()) + Duration::from_nanos(nanos);
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = reader.join();
}
