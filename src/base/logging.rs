//! Log lines on standard error, shaped by what standard error is connected to:
//!
//! * a terminal — colour, unless `NO_COLOR` is set (https://no-color.org);
//! * the journal (a systemd unit's `StandardError=journal…`: `JOURNAL_STREAM` names the stream
//!   and fstat(2) of standard error matches it) — no colour, no timestamp (journald stamps each
//!   entry), every line starting with its sd-daemon priority (`<3>` error, `<4>` warning, `<6>`
//!   info, `<7>` debug), which journald turns into the entry's `PRIORITY` and strips;
//! * anything else (cloud-init's output log, a pipe, a file) — plain text lines.
//!
//! Why priority prefixes and not the native journal protocol: docs/logging.md.

use std::io::{IsTerminal, Write};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// What standard error is connected to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    Terminal,
    Journal,
    Plain,
}

impl Stderr {
    /// Standard error of this process, as systemd documents for `JOURNAL_STREAM`: the variable
    /// is inherited by children whose standard error goes elsewhere (a user-data script run by
    /// cloud-final writes to cloud-init's pipe), so it counts only when it names this stream.
    pub fn detect() -> Stderr {
        let stream = std::env::var("JOURNAL_STREAM").ok();
        let own = nix::sys::stat::fstat(std::io::stderr())
            .ok()
            .map(|st| (st.st_dev, st.st_ino));
        classify(stream.as_deref(), own, std::io::stderr().is_terminal())
    }

    /// ANSI colour: on a terminal only, and not when `NO_COLOR` is set to anything non-empty.
    pub fn colour(self) -> bool {
        self == Stderr::Terminal
            && !matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty())
    }
}

/// `journal_stream` is `JOURNAL_STREAM` ("<dev>:<ino>", decimal), `own` the device and inode of
/// standard error.
pub(crate) fn classify(
    journal_stream: Option<&str>,
    own: Option<(u64, u64)>,
    terminal: bool,
) -> Stderr {
    let named = journal_stream.and_then(|v| {
        let (dev, ino) = v.trim().split_once(':')?;
        Some((dev.parse::<u64>().ok()?, ino.parse::<u64>().ok()?))
    });
    match (named, own) {
        (Some(n), Some(o)) if n == o => Stderr::Journal,
        _ if terminal => Stderr::Terminal,
        _ => Stderr::Plain,
    }
}

/// The sd-daemon(3) prefix journald reads as the line's priority.
pub fn priority(level: Level) -> &'static str {
    match level {
        Level::ERROR => "<3>",
        Level::WARN => "<4>",
        Level::INFO => "<6>",
        Level::DEBUG | Level::TRACE => "<7>",
    }
}

/// `text` with `prefix` at the start of every line: journald reads each line as its own entry.
pub(crate) fn prefix_lines(prefix: &str, text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + prefix.len() * 2);
    for line in text.split_inclusive(|b| *b == b'\n') {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(line);
    }
    out
}

/// Where tracing writes: standard error, one whole event per write, each line prefixed with
/// the event's priority when standard error is the journal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StderrWriter {
    journal: bool,
}

impl<'a> MakeWriter<'a> for StderrWriter {
    type Writer = EventWriter;
    fn make_writer(&'a self) -> EventWriter {
        self.for_level(Level::INFO)
    }
    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> EventWriter {
        self.for_level(*meta.level())
    }
}

impl StderrWriter {
    fn for_level(&self, level: Level) -> EventWriter {
        EventWriter {
            prefix: self.journal.then(|| priority(level)),
            buf: Vec::new(),
        }
    }
}

/// One event's bytes, written to standard error when dropped.
pub(crate) struct EventWriter {
    prefix: Option<&'static str>,
    buf: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let out = match self.prefix {
            // Without the timestamp the padded level (" INFO") would start the message.
            Some(p) => prefix_lines(p, self.buf.trim_ascii_start()),
            None => std::mem::take(&mut self.buf),
        };
        // Nowhere left to report a failed write to standard error.
        let _ = std::io::stderr().lock().write_all(&out);
    }
}

/// How `init` sets up logging; returned so later errors are printed the same way.
#[derive(Clone, Copy, Debug)]
pub struct Logs {
    pub stderr: Stderr,
}

/// Install the global subscriber. `directives` is the tracing filter used when
/// `EKS_NODEINIT_LOG` is unset; `json` selects one JSON object per line (unchanged by where
/// standard error goes, apart from the journal's priority prefix, which journald strips).
pub fn init(directives: &str, json: bool) -> Logs {
    let stderr = Stderr::detect();
    let filter = tracing_subscriber::EnvFilter::try_from_env("EKS_NODEINIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(StderrWriter {
            journal: stderr == Stderr::Journal,
        })
        .with_target(false)
        .with_ansi(stderr.colour());
    match (json, stderr) {
        (true, _) => builder.json().init(),
        (false, Stderr::Journal) => builder.without_time().init(),
        (false, _) => builder.init(),
    }
    Logs { stderr }
}

impl Logs {
    /// Print an error (e.g. main's `error: … caused by: …` chain) on standard error: at the
    /// journal's error priority, every line, when standard error is the journal.
    pub fn error(&self, text: &str) {
        let mut line = text.as_bytes().to_vec();
        if !line.ends_with(b"\n") {
            line.push(b'\n');
        }
        if self.stderr == Stderr::Journal {
            line = prefix_lines(priority(Level::ERROR), &line);
        }
        let _ = std::io::stderr().lock().write_all(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_only_when_the_stream_is_standard_error() {
        let own = Some((64769, 123456));
        assert_eq!(classify(Some("64769:123456"), own, false), Stderr::Journal);
        // Inherited from a unit by a child whose standard error is a pipe (cloud-final's
        // user-data script): plain, even on a terminal it is a terminal.
        assert_eq!(classify(Some("64769:999"), own, false), Stderr::Plain);
        assert_eq!(classify(Some("64769:999"), own, true), Stderr::Terminal);
        assert_eq!(classify(None, own, false), Stderr::Plain);
        assert_eq!(classify(Some("garbage"), own, false), Stderr::Plain);
        assert_eq!(classify(Some("64769:123456"), None, false), Stderr::Plain);
    }

    #[test]
    fn every_line_carries_the_prefix() {
        assert_eq!(
            prefix_lines("<3>", b"error: x\n  caused by: y\n"),
            b"<3>error: x\n<3>  caused by: y\n"
        );
        assert_eq!(prefix_lines("<4>", b"no newline"), b"<4>no newline");
        assert_eq!(prefix_lines("<4>", b""), b"");
    }

    #[test]
    fn priorities_follow_sd_daemon() {
        let p: Vec<_> = [
            Level::ERROR,
            Level::WARN,
            Level::INFO,
            Level::DEBUG,
            Level::TRACE,
        ]
        .into_iter()
        .map(priority)
        .collect();
        assert_eq!(p, ["<3>", "<4>", "<6>", "<7>", "<7>"]);
    }
}
