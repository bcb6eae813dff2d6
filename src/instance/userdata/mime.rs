//! MIME as Go reads it: `net/mail` and `net/textproto` headers, `mime.ParseMediaType`,
//! `mime/multipart` and `mime/quotedprintable`, over a complete message in memory.

use std::collections::BTreeMap;

/// Header fields in order, keys as written.
#[derive(Debug, Default)]
pub(crate) struct Headers(Vec<(Vec<u8>, Vec<u8>)>);

impl Headers {
    /// The first value of `name` (Go's `Header.Get`: canonical keys, so case does not
    /// matter, and a key Go leaves uncanonical, such as one with a space, never matches).
    pub fn get(&self, name: &str) -> String {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// How a header block ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    Blank,
    Eof,
}

/// One line from `pos` without its `\n` or `\r\n` (bufio's `ReadLine`); `None` at the end.
fn take_line<'a>(data: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = data.get(*pos..).filter(|r| !r.is_empty())?;
    let (line, used) = match memchr::memchr(b'\n', rest) {
        Some(i) => {
            let l = &rest[..i];
            (l.strip_suffix(b"\r").unwrap_or(l), i + 1)
        }
        None => (rest, rest.len()),
    };
    *pos += used;
    Some(line)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|c| !matches!(c, b' ' | b'\t'));
    let Some(start) = start else { return &[] };
    let end = s
        .iter()
        .rposition(|c| !matches!(c, b' ' | b'\t'))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// RFC 7230 `tchar`, Go's `validHeaderFieldByte`.
fn field_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// Go's `validHeaderValueByte`: VCHAR, SP, HTAB and obs-text.
fn value_byte(c: u8) -> bool {
    matches!(c, b'\t' | b' ' | 0x21..=0x7e | 0x80..=0xff)
}

/// A header block from `pos`, as Go's `net/mail` (`strict` false: any key, any value) or
/// `net/textproto` (`strict`: token keys, visible values) reads it. Continuation lines
/// (starting with a space or tab) join the previous line with one space. `pos` ends after
/// the blank line.
pub(crate) fn read_headers(
    data: &[u8],
    pos: &mut usize,
    strict: bool,
) -> Result<(Headers, End), String> {
    let mut h = Headers::default();
    if matches!(data.get(*pos), Some(b' ' | b'\t')) {
        return Err("the first header line starts with white space".into());
    }
    loop {
        let Some(line) = take_line(data, pos) else {
            return Ok((h, End::Eof));
        };
        if line.is_empty() {
            return Ok((h, End::Blank));
        }
        if strict && !line.contains(&b':') {
            return Err("a header line has no colon".into());
        }
        let mut kv = trim(line).to_vec();
        while matches!(data.get(*pos), Some(b' ' | b'\t')) {
            while matches!(data.get(*pos), Some(b' ' | b'\t')) {
                *pos += 1;
            }
            kv.push(b' ');
            let Some(l) = take_line(data, pos) else { break };
            kv.extend_from_slice(trim(l));
        }
        let Some(colon) = kv.iter().position(|c| *c == b':') else {
            return Err("a header line has no colon".into());
        };
        let (key, value) = (&kv[..colon], &kv[colon + 1..]);
        if strict {
            if key.is_empty() || !key.iter().all(|c| field_byte(*c) || *c == b' ') {
                return Err("a header name holds characters a header name cannot".into());
            }
            if !value.iter().all(|c| value_byte(*c)) {
                return Err("a header value holds a control character".into());
            }
            if h.0.len() >= super::MAX_PART_HEADERS {
                return Err(format!(
                    "more than {} header lines",
                    super::MAX_PART_HEADERS
                ));
            }
        } else if key.is_empty() {
            continue;
        }
        let start = value
            .iter()
            .position(|c| !matches!(c, b' ' | b'\t'))
            .unwrap_or(value.len());
        h.0.push((key.to_vec(), value[start..].to_vec()));
    }
}

/// `mime.ParseMediaType`'s error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MediaTypeError(&'static str);

impl std::fmt::Display for MediaTypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

fn tspecial(c: char) -> bool {
    "()<>@,;:\\\"/[]?=".contains(c)
}

fn token_char(c: char) -> bool {
    c.is_ascii() && c > ' ' && c != '\x7f' && !tspecial(c)
}

fn consume_token(v: &str) -> (&str, &str) {
    let end = v.find(|c| !token_char(c)).unwrap_or(v.len());
    v.split_at(end)
}

/// A token or a quoted string; `None` when neither.
fn consume_value(v: &str) -> Option<(String, &str)> {
    let Some(q) = v.strip_prefix('"') else {
        let (t, rest) = consume_token(v);
        return (!t.is_empty()).then(|| (t.to_string(), rest));
    };
    let b = q.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                let value = String::from_utf8_lossy(&out).into_owned();
                return Some((value, q.get(i + 1..).unwrap_or("")));
            }
            b'\\' if b.get(i + 1).is_some_and(|n| tspecial(char::from(*n))) => {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            b'\r' | b'\n' => return None,
            _ => out.push(c),
        }
        i += 1;
    }
    None
}

fn consume_param(v: &str) -> Option<(String, String, &str)> {
    let rest = v.trim_start().strip_prefix(';')?.trim_start();
    let (key, rest) = consume_token(rest);
    if key.is_empty() {
        return None;
    }
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let (value, rest) = consume_value(rest)?;
    Some((key.to_ascii_lowercase(), value, rest))
}

fn check_type(t: &str) -> Result<(), MediaTypeError> {
    let (typ, rest) = consume_token(t);
    if typ.is_empty() {
        return Err(MediaTypeError("no media type"));
    }
    if rest.is_empty() {
        return Ok(());
    }
    let Some(rest) = rest.strip_prefix('/') else {
        return Err(MediaTypeError("expected slash after first token"));
    };
    let (sub, rest) = consume_token(rest);
    if sub.is_empty() {
        return Err(MediaTypeError("expected token after slash"));
    }
    if !rest.is_empty() {
        return Err(MediaTypeError("unexpected content after media subtype"));
    }
    Ok(())
}

fn unhex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn percent_unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hi = b.get(i + 1).copied().and_then(unhex)?;
            let lo = b.get(i + 2).copied().and_then(unhex)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// RFC 2231 `charset'language'value` (us-ascii and utf-8 only, as Go).
fn decode_2231(v: &str) -> Option<String> {
    let mut it = v.splitn(3, '\'');
    let (charset, _lang, value) = (it.next()?, it.next()?, it.next()?);
    let charset = charset.to_ascii_lowercase();
    if charset != "us-ascii" && charset != "utf-8" {
        return None;
    }
    percent_unescape(value)
}

/// `mime.ParseMediaType`: the lower-case media type and its parameters (keys lower-case),
/// RFC 2231 continuations stitched.
pub(crate) fn parse_media_type(v: &str) -> Result<(String, Vec<(String, String)>), MediaTypeError> {
    let (base, mut rest) = v.split_at(v.find(';').unwrap_or(v.len()));
    let media_type = base.to_lowercase().trim().to_string();
    check_type(&media_type)?;
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    let mut continued: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let Some((key, value, next)) = consume_param(rest) else {
            if rest.trim() == ";" {
                break; // a trailing semicolon is not an error
            }
            return Err(MediaTypeError("invalid media parameter"));
        };
        let map = match key.find('*') {
            Some(star) => continued.entry(key[..star].to_string()).or_default(),
            None => &mut params,
        };
        if map.insert(key, value).is_some() {
            return Err(MediaTypeError("duplicate parameter name"));
        }
        rest = next;
    }
    for (base, pieces) in continued {
        if let Some(v) = pieces.get(&format!("{base}*")) {
            if let Some(d) = decode_2231(v) {
                params.insert(base, d);
            }
            continue;
        }
        let mut value = String::new();
        let mut valid = false;
        for n in 0..pieces.len() {
            if let Some(v) = pieces.get(&format!("{base}*{n}")) {
                value.push_str(v);
            } else if let Some(v) = pieces.get(&format!("{base}*{n}*")) {
                let d = if n == 0 {
                    decode_2231(v)
                } else {
                    percent_unescape(v)
                };
                value.push_str(&d.unwrap_or_default());
            } else {
                break;
            }
            valid = true;
        }
        if valid {
            params.insert(base, value);
        }
    }
    Ok((media_type, params.into_iter().collect()))
}

/// Why a multipart body cannot be read.
#[derive(Debug)]
pub(crate) enum MultipartError {
    Body(String),
    /// In part n (from 1).
    Part(usize, String),
}

/// One part: its headers and raw body.
pub struct Part<'a> {
    pub number: usize,
    pub headers: Headers,
    body: &'a [u8],
}

impl Part<'_> {
    /// The body, quoted-printable decoded when its Content-Transfer-Encoding says so.
    pub fn content(&self) -> Result<Vec<u8>, String> {
        if self
            .headers
            .get("Content-Transfer-Encoding")
            .eq_ignore_ascii_case("quoted-printable")
        {
            quoted_printable(self.body)
        } else {
            Ok(self.body.to_vec())
        }
    }
}

/// Go's `mime/multipart` Reader over a whole body.
pub(crate) struct Multipart<'a> {
    data: &'a [u8],
    pos: usize,
    parts: usize,
    headers: usize,
    crlf: bool,
    dash: Vec<u8>,
    finder_crlf: memchr::memmem::Finder<'static>,
    finder_lf: memchr::memmem::Finder<'static>,
}

/// How the bytes after a possible boundary decide it (Go's `matchAfterPrefix` at the end of
/// the input).
enum After {
    Boundary,
    NotBoundary,
    Unterminated,
}

fn after(buf: &[u8], prefix: usize) -> After {
    match (buf.get(prefix), buf.get(prefix + 1)) {
        (None, _) => After::Boundary,
        (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => After::Boundary,
        (Some(b'-'), None) => After::Unterminated,
        (Some(b'-'), Some(b'-')) => After::Boundary,
        _ => After::NotBoundary,
    }
}

fn skip_lwsp(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
    &b[n..]
}

impl<'a> Multipart<'a> {
    pub fn new(data: &'a [u8], boundary: &str) -> Result<Multipart<'a>, MultipartError> {
        if boundary.is_empty() {
            return Err(MultipartError::Body(
                "the Content-Type has no boundary parameter (or an empty one)".into(),
            ));
        }
        let dash = format!("--{boundary}").into_bytes();
        let with =
            |nl: &[u8]| memchr::memmem::Finder::new(&[nl, dash.as_slice()].concat()).into_owned();
        Ok(Multipart {
            data,
            pos: 0,
            parts: 0,
            headers: 0,
            crlf: true,
            finder_crlf: with(b"\r\n"),
            finder_lf: with(b"\n"),
            dash,
        })
    }

    /// Parts seen so far.
    pub fn parts(&self) -> usize {
        self.parts
    }

    fn nl(&self) -> &'static [u8] {
        if self.crlf {
            b"\r\n"
        } else {
            b"\n"
        }
    }

    fn is_final(&self, line: &[u8]) -> bool {
        let Some(rest) = line
            .strip_prefix(self.dash.as_slice())
            .and_then(|r| r.strip_prefix(b"--"))
        else {
            return false;
        };
        let rest = skip_lwsp(rest);
        rest.is_empty() || rest == self.nl()
    }

    fn is_delimiter(&mut self, line: &[u8]) -> bool {
        let Some(rest) = line.strip_prefix(self.dash.as_slice()) else {
            return false;
        };
        let rest = skip_lwsp(rest);
        if self.parts == 0 && rest == b"\n" {
            self.crlf = false; // LF line ends, as Go allows from the first boundary on
        }
        rest == self.nl()
    }

    fn unterminated(&self) -> MultipartError {
        MultipartError::Part(
            self.parts,
            "the part does not end: no boundary line follows it".into(),
        )
    }

    /// The body of the part whose headers end at `pos`: up to the first new line followed
    /// by the boundary (or the boundary right away, for an empty part).
    fn body(&mut self) -> Result<&'a [u8], MultipartError> {
        let data = self.data;
        let start = self.pos;
        let rest = data.get(start..).unwrap_or_default();
        let mut from = start;
        if rest.starts_with(&self.dash) {
            match after(rest, self.dash.len()) {
                After::Boundary => return Ok(&data[start..start]),
                After::NotBoundary => from = start + self.dash.len(),
                After::Unterminated => return Err(self.unterminated()),
            }
        } else if self.dash.starts_with(rest) {
            return Err(self.unterminated());
        }
        let finder = if self.crlf {
            &self.finder_crlf
        } else {
            &self.finder_lf
        };
        let len = finder.needle().len();
        loop {
            let tail = data.get(from..).unwrap_or_default();
            let Some(i) = finder.find(tail) else {
                return Err(self.unterminated());
            };
            let at = from + i;
            match after(&data[at..], len) {
                After::Boundary => {
                    self.pos = at;
                    return Ok(&data[start..at]);
                }
                After::NotBoundary => from = at + len,
                After::Unterminated => return Err(self.unterminated()),
            }
        }
    }

    /// The next part, `None` after the closing delimiter (or, as Go, when a part's headers
    /// run into the end of the input).
    pub(crate) fn next_part(&mut self) -> Result<Option<Part<'a>>, MultipartError> {
        let mut expect_new = false;
        loop {
            let rest = self.data.get(self.pos..).unwrap_or_default();
            let Some(end) = memchr::memchr(b'\n', rest) else {
                if self.is_final(rest) {
                    self.pos = self.data.len();
                    return Ok(None);
                }
                return Err(MultipartError::Body(if self.parts == 0 {
                    "no boundary line: the boundary parameter names none of its lines".into()
                } else {
                    "it ends before the closing boundary line (`--boundary--`)".into()
                }));
            };
            let line = &rest[..=end];
            self.pos += end + 1;
            if self.is_delimiter(line) {
                self.parts += 1;
                let n = self.parts;
                let (headers, how) = read_headers(self.data, &mut self.pos, true)
                    .map_err(|e| MultipartError::Part(n, e))?;
                if how == End::Eof {
                    return Ok(None);
                }
                self.headers += headers.0.len();
                if self.headers > super::MAX_PART_HEADERS {
                    return Err(MultipartError::Body(format!(
                        "more than {} header lines",
                        super::MAX_PART_HEADERS
                    )));
                }
                let body = self.body()?;
                return Ok(Some(Part {
                    number: n,
                    headers,
                    body,
                }));
            }
            if self.is_final(line) {
                return Ok(None);
            }
            if expect_new {
                return Err(MultipartError::Body(format!(
                    "after part {} a line is neither a boundary nor the closing boundary",
                    self.parts
                )));
            }
            if self.parts == 0 {
                continue; // the preamble
            }
            if line == self.nl() {
                expect_new = true;
                continue;
            }
            return Err(MultipartError::Body(format!(
                "after part {} an unexpected line where a boundary belongs",
                self.parts
            )));
        }
    }
}

/// Go's `mime/quotedprintable` Reader over a whole body: `=XX` escapes, soft line breaks
/// (`=` at the end of a line), trailing white space dropped, a `=` not followed by two hex
/// digits kept as it is (but not at the end of a line).
pub(crate) fn quoted_printable(data: &[u8]) -> Result<Vec<u8>, String> {
    let invalid = |what: &str| format!("the quoted-printable body holds {what}");
    let mut out = Vec::with_capacity(data.len());
    let mut pos = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        let (whole, eof) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..=i], false),
            None => (rest, true),
        };
        pos += whole.len();
        let kept = whole
            .iter()
            .rposition(|c| !matches!(c, b'\n' | b'\r' | b' ' | b'\t'))
            .map_or(0, |i| i + 1);
        let mut line = whole[..kept].to_vec();
        let mut after_soft_break_error = false;
        if line.last() == Some(&b'=') {
            line.pop();
            let right = skip_lwsp(&whole[kept..]);
            let ok = right.starts_with(b"\n")
                || right.starts_with(b"\r\n")
                || (right.is_empty() && !line.is_empty() && eof);
            after_soft_break_error = !ok;
        } else if whole.ends_with(b"\r\n") {
            line.extend_from_slice(b"\r\n");
        } else if whole.ends_with(b"\n") {
            line.push(b'\n');
        }
        decode_qp_line(&line, &mut out).map_err(invalid)?;
        if after_soft_break_error {
            return Err(invalid("characters after a soft line break (`=`)"));
        }
    }
    Ok(out)
}

/// One quoted-printable line (its soft break already removed) into `out`; the error names what
/// Go's reader refuses.
fn decode_qp_line(line: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
    let mut i = 0;
    while let Some(&c) = line.get(i) {
        match c {
            b'=' => {
                let hi = line.get(i + 1).copied().and_then(unhex);
                let lo = line.get(i + 2).copied().and_then(unhex);
                if let (Some(hi), Some(lo)) = (hi, lo) {
                    out.push(hi << 4 | lo);
                    i += 3;
                    continue;
                }
                // A lone `=` is kept, as Go keeps it, unless it ends the line.
                if !line.get(i + 1).is_some_and(|n| *n != b'\r' && *n != b'\n') {
                    return Err("a `=` at the end of a line");
                }
                out.push(b'=');
            }
            b'\t' | b'\r' | b'\n' | 0x80..=0xff | b' '..=b'~' => out.push(c),
            _ => return Err("a control character"),
        }
        i += 1;
    }
    Ok(())
}
