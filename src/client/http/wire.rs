//! HTTP/1.1 on the wire for perfgate's own transport ([`super::own`]): the request's bytes, the
//! response head (parsed with `httparse`) and the body's framing (chunked, `Content-Length`, or
//! until close) decoded in place, byte by byte, so a read is never kept for a later one. Pure:
//! bytes in, bytes and typed errors out. Every size a server chooses is bounded: the head
//! ([`MAX_HEAD_BYTES`], [`MAX_HEADERS`]), a chunk-size line and its extensions
//! ([`MAX_CHUNK_LINE`]), the trailers ([`MAX_TRAILER_BYTES`]), a chunk size (64 bits; the body
//! itself is bounded by the fold's `MAX_BODY_BYTES`). The error texts are hyper's for the same
//! events, so a failure reads the same over either transport.

use std::fmt;

/// Largest response head accepted, bytes (hyper's default read buffer limit, 8 KiB + 100 x
/// 4 KiB: what the reqwest transport accepts).
pub const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// Most header fields in a response head (hyper's default).
pub const MAX_HEADERS: usize = 100;
/// Longest chunk-size line, extensions included, bytes.
pub const MAX_CHUNK_LINE: usize = 16 << 10;
/// Most trailer bytes after the last chunk.
pub const MAX_TRAILER_BYTES: usize = 16 << 10;

/// The chunk size does not fit 64 bits.
pub const OVERFLOW: &str = "invalid chunk size: overflow";
/// A chunk-size line without a hex digit.
pub const NO_DIGIT: &str = "Invalid chunk size line: missing size digit";
/// A chunk-size line with a character that is not hex, whitespace or an extension.
pub const INVALID_SIZE: &str = "Invalid chunk size line: Invalid Size";
/// A chunk-size line longer than [`MAX_CHUNK_LINE`].
pub const LINE_OVER: &str = "chunk extensions over limit";
/// A chunk's data not followed by CR LF.
pub const BODY_CR: &str = "Invalid chunk body CR";
/// A chunk's data followed by CR without LF.
pub const BODY_LF: &str = "Invalid chunk body LF";
/// Trailers longer than [`MAX_TRAILER_BYTES`].
pub const TRAILERS: &str = "chunk trailers bytes over limit";

/// Why the response could not be read as HTTP/1.1 (hyper's words for the same events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The head is larger than [`MAX_HEAD_BYTES`] or has more than [`MAX_HEADERS`] fields.
    HeadTooLarge,
    /// The head does not parse.
    Head(String),
    /// `Content-Length` is not a number, or two differ.
    ContentLength,
    /// The chunked framing is broken: a chunk-size line that is not hex, overflows 64 bits or
    /// is longer than [`MAX_CHUNK_LINE`], a chunk without its CRLF, trailers longer than
    /// [`MAX_TRAILER_BYTES`] (hyper's words).
    Chunk(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::HeadTooLarge => f.write_str("message head is too large"),
            WireError::Head(e) => write!(f, "invalid HTTP response parsed ({e})"),
            WireError::ContentLength => f.write_str("invalid content-length parsed"),
            WireError::Chunk(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for WireError {}

/// A parsed response head.
#[derive(Debug)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// HTTP/1.1 (true) or 1.0.
    pub http11: bool,
    /// The header fields, in order (names lowercased by `HeaderMap`).
    pub headers: reqwest::header::HeaderMap,
    /// Its length in the buffer, bytes (the body starts after it).
    pub len: usize,
}

/// Parses a response head from the start of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, WireError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let mut headers = reqwest::header::HeaderMap::with_capacity(resp.headers.len());
            for h in resp.headers.iter() {
                let name = reqwest::header::HeaderName::from_bytes(h.name.as_bytes())
                    .map_err(|_| WireError::Head("invalid header name".into()))?;
                let value = reqwest::header::HeaderValue::from_bytes(h.value)
                    .map_err(|_| WireError::Head("invalid header value".into()))?;
                headers.append(name, value);
            }
            Ok(Some(Head {
                status: resp.code.unwrap_or(0),
                http11: resp.version == Some(1),
                headers,
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
            Err(WireError::HeadTooLarge)
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(WireError::HeadTooLarge),
        Err(e) => Err(WireError::Head(e.to_string())),
    }
}

/// How a response body is delimited (RFC 9112 s6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length` bytes.
    Length(u64),
    /// Until the server closes the connection.
    Close,
}

impl Framing {
    /// The framing of a response with `status` and `headers` to a POST or GET.
    pub fn of(status: u16, headers: &reqwest::header::HeaderMap) -> Result<Framing, WireError> {
        if status == 204 || status == 304 || (100..200).contains(&status) {
            return Ok(Framing::Length(0));
        }
        let te: Vec<&reqwest::header::HeaderValue> = headers
            .get_all(reqwest::header::TRANSFER_ENCODING)
            .iter()
            .collect();
        if !te.is_empty() {
            let last = te
                .last()
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.rsplit(',').next())
                .map(|c| c.trim().eq_ignore_ascii_case("chunked"));
            return Ok(if last == Some(true) {
                Framing::Chunked
            } else {
                Framing::Close
            });
        }
        let mut len: Option<u64> = None;
        for v in headers.get_all(reqwest::header::CONTENT_LENGTH) {
            for part in v.to_str().map_err(|_| WireError::ContentLength)?.split(',') {
                let n: u64 = part.trim().parse().map_err(|_| WireError::ContentLength)?;
                if len.is_some_and(|l| l != n) {
                    return Err(WireError::ContentLength);
                }
                len = Some(n);
            }
        }
        Ok(len.map_or(Framing::Close, Framing::Length))
    }
}

/// Where a chunked body's decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the chunk size's hex digits (`digits` so far).
    Size { digits: u32 },
    /// After the size: whitespace or an extension, until LF.
    Extension,
    /// Inside a chunk's data.
    Data,
    /// After the data: its CR (or a bare LF).
    DataCr,
    /// After the data's CR: its LF.
    DataLf,
    /// After the last chunk: trailer lines until an empty one (`line` bytes into this line).
    Trailer { line: usize },
}

/// Decodes a body's framing in place: [`BodyDecoder::decode`] moves the body bytes of a read to
/// the front of it and drops the framing.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    framing: Framing,
    state: Chunk,
    /// Chunked: the current chunk's size, then its bytes still to come; `Length`: bytes to come.
    remaining: u64,
    /// Bytes of the current chunk-size line (extensions included).
    line: usize,
    /// Trailer bytes so far.
    trailer: usize,
    done: bool,
    /// The framing broke after the body bytes [`BodyDecoder::decode`] last gave.
    error: Option<WireError>,
}

impl BodyDecoder {
    /// A decoder for a body delimited by `framing`.
    pub fn new(framing: Framing) -> BodyDecoder {
        let (remaining, done) = match framing {
            Framing::Length(n) => (n, n == 0),
            _ => (0, false),
        };
        BodyDecoder {
            framing,
            state: Chunk::Size { digits: 0 },
            remaining,
            line: 0,
            trailer: 0,
            done,
            error: None,
        }
    }

    /// The body ended by its framing (the last chunk and its trailers, or `Content-Length`
    /// bytes): the connection can carry another request.
    pub fn done(&self) -> bool {
        self.done
    }

    /// The body ends when the server closes the connection.
    pub fn until_close(&self) -> bool {
        self.framing == Framing::Close
    }

    /// What an end of the connection before the body's end is, in hyper's words: inside a
    /// chunk's data or a `Content-Length` body, the body is short; anywhere else in the chunked
    /// framing, a line is.
    pub fn eof_message(&self) -> &'static str {
        if self.framing == Framing::Chunked && self.state != Chunk::Data {
            "unexpected EOF during chunk size line"
        } else {
            "end of file before message length reached"
        }
    }

    /// The framing broke: after the body bytes before the break were handed on (as hyper hands
    /// on a chunk before it reads the next size line), this is the body's end.
    pub fn error(&self) -> Option<&WireError> {
        self.error.as_ref()
    }

    /// Decodes one read: the body bytes of `buf` are moved to its front; returns how many, and
    /// how many of `buf`'s bytes were framing or body (the rest, after the body's end, belongs
    /// to no response). Where the framing breaks, the bytes before are returned and
    /// [`BodyDecoder::error`] says why; a later call is that error.
    pub fn decode(&mut self, buf: &mut [u8]) -> Result<(usize, usize), WireError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        match self.framing {
            Framing::Close => Ok((buf.len(), buf.len())),
            Framing::Length(_) => {
                let n = (buf.len() as u64).min(self.remaining) as usize;
                self.remaining -= n as u64;
                self.done = self.remaining == 0;
                Ok((n, n))
            }
            Framing::Chunked => {
                let mut out = 0;
                let mut i = 0;
                if let Err(e) = self.chunked(buf, &mut out, &mut i) {
                    self.error = Some(e);
                }
                Ok((out, i))
            }
        }
    }

    /// Decodes `buf[*i..]`, moving the data to `buf[*out..]`; on an error, `*i` and `*out` say
    /// how far it got.
    fn chunked(&mut self, buf: &mut [u8], out: &mut usize, i: &mut usize) -> Result<(), WireError> {
        while *i < buf.len() && !self.done {
            let at = *i;
            match self.state {
                Chunk::Data => {
                    let n = ((buf.len() - at) as u64).min(self.remaining) as usize;
                    buf.copy_within(at..at + n, *out);
                    *out += n;
                    *i += n;
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        self.state = Chunk::DataCr;
                    }
                    continue;
                }
                Chunk::Size { digits } => {
                    self.line_byte()?;
                    let b = buf[at];
                    match hex(b) {
                        Some(d) => {
                            if self.remaining > u64::MAX >> 4 {
                                return Err(WireError::Chunk(OVERFLOW));
                            }
                            self.remaining = self.remaining << 4 | u64::from(d);
                            self.state = Chunk::Size {
                                digits: digits.saturating_add(1),
                            };
                        }
                        None if digits == 0 => {
                            return Err(WireError::Chunk(NO_DIGIT));
                        }
                        None => match b {
                            b'\n' => self.end_size_line(),
                            b'\r' | b' ' | b'\t' | b';' => self.state = Chunk::Extension,
                            _ => return Err(WireError::Chunk(INVALID_SIZE)),
                        },
                    }
                }
                Chunk::Extension => {
                    self.line_byte()?;
                    if buf[at] == b'\n' {
                        self.end_size_line();
                    }
                }
                Chunk::DataCr => match buf[at] {
                    b'\r' => self.state = Chunk::DataLf,
                    b'\n' => self.next_chunk(),
                    _ => return Err(WireError::Chunk(BODY_CR)),
                },
                Chunk::DataLf => match buf[at] {
                    b'\n' => self.next_chunk(),
                    _ => return Err(WireError::Chunk(BODY_LF)),
                },
                Chunk::Trailer { line } => {
                    self.trailer += 1;
                    if self.trailer > MAX_TRAILER_BYTES {
                        return Err(WireError::Chunk(TRAILERS));
                    }
                    self.state = match buf[at] {
                        b'\n' if line == 0 => {
                            self.done = true;
                            Chunk::Trailer { line: 0 }
                        }
                        b'\n' => Chunk::Trailer { line: 0 },
                        b'\r' => Chunk::Trailer { line },
                        _ => Chunk::Trailer { line: line + 1 },
                    };
                }
            }
            *i += 1;
        }
        Ok(())
    }

    /// One more byte of the chunk-size line, bounded.
    fn line_byte(&mut self) -> Result<(), WireError> {
        self.line += 1;
        if self.line > MAX_CHUNK_LINE {
            return Err(WireError::Chunk(LINE_OVER));
        }
        Ok(())
    }

    fn end_size_line(&mut self) {
        self.line = 0;
        self.state = if self.remaining == 0 {
            Chunk::Trailer { line: 0 }
        } else {
            Chunk::Data
        };
    }

    fn next_chunk(&mut self) {
        self.state = Chunk::Size { digits: 0 };
        self.remaining = 0;
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The bytes of a request: the request line, `Host` (unless `headers` has one), `headers` in order, `Content-Length`, the
/// body; one buffer, written with one write.
pub fn request(
    method: &str,
    url: &reqwest::Url,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len() + headers.len() * 32);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(url.path().as_bytes());
    if let Some(q) = url.query() {
        out.push(b'?');
        out.extend_from_slice(q.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    // a `Host` among the headers (the scenario's `headers:`) is sent instead, as hyper does
    if !headers.contains_key(reqwest::header::HOST) {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(url.host_str().unwrap_or("").as_bytes());
        if let Some(p) = url.port() {
            out.extend_from_slice(format!(":{p}").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    // the body's framing is this function's: a `Content-Length` or `Transfer-Encoding` among
    // the scenario's headers would contradict it (a second length, a chunked body sent whole)
    let framing = [
        reqwest::header::CONTENT_LENGTH,
        reqwest::header::TRANSFER_ENCODING,
    ];
    for (name, value) in headers.iter().filter(|(n, _)| !framing.contains(n)) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if method != "GET" || !body.is_empty() {
        out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests;
