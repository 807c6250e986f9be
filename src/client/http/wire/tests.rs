use super::*;

/// Decodes `reads` in turn: the body bytes, and the decoder after.
fn decode_all(framing: Framing, reads: &[&[u8]]) -> (Result<Vec<u8>, WireError>, BodyDecoder) {
    let mut d = BodyDecoder::new(framing);
    let mut body = Vec::new();
    for r in reads {
        let mut buf = r.to_vec();
        match d.decode(&mut buf) {
            Ok((n, _)) => body.extend_from_slice(&buf[..n]),
            Err(e) => return (Err(e), d),
        }
        if let Some(e) = d.error() {
            return (Err(e.clone()), d);
        }
    }
    (Ok(body), d)
}

#[test]
fn chunked_bodies_decode_in_place_across_any_split() {
    let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
    // every split in two of the bytes gives the same body and ends the same way
    for at in 0..=wire.len() {
        let (a, b) = wire.split_at(at);
        let (body, d) = decode_all(Framing::Chunked, &[a, b]);
        assert_eq!(body.unwrap(), b"hello, world", "split at {at}");
        assert!(d.done(), "split at {at}");
    }
    // one byte per read
    let reads: Vec<&[u8]> = wire.chunks(1).collect();
    let (body, d) = decode_all(Framing::Chunked, &reads);
    assert_eq!(body.unwrap(), b"hello, world");
    assert!(d.done());
    // bytes after the last chunk are not the body's: "2\r\n" 3 + "ab" 2 + "\r\n" 2 + "0\r\n" 3
    // + "\r\n" 2 = 12 used of 16
    let mut d = BodyDecoder::new(Framing::Chunked);
    let mut buf = b"2\r\nab\r\n0\r\n\r\nJUNK".to_vec();
    assert_eq!(d.decode(&mut buf), Ok((2, 12)));
    assert!(d.done());
}

#[test]
fn a_chunked_body_without_its_end_is_not_done() {
    let (body, d) = decode_all(Framing::Chunked, &[b"3\r\nabc\r\n"]);
    assert_eq!(body.unwrap(), b"abc");
    assert!(!d.done());
    // hyper's words for an end there, and inside a chunk's data
    assert_eq!(d.eof_message(), "unexpected EOF during chunk size line");
    let (_, d) = decode_all(Framing::Chunked, &[b"3\r\nab"]);
    assert_eq!(d.eof_message(), "end of file before message length reached");
    // bare LF line ends are accepted, as hyper does
    let (body, d) = decode_all(Framing::Chunked, &[b"3\nabc\n0\n\n"]);
    assert_eq!(body.unwrap(), b"abc");
    assert!(d.done());
}

#[test]
fn content_length_and_close_bodies() {
    let (body, d) = decode_all(Framing::Length(5), &[b"he", b"lloXX"]);
    assert_eq!(body.unwrap(), b"hello");
    assert!(d.done());
    let (body, d) = decode_all(Framing::Close, &[b"any", b"thing"]);
    assert_eq!(body.unwrap(), b"anything");
    assert!(!d.done() && d.until_close());
    assert!(BodyDecoder::new(Framing::Length(0)).done());
}

// Hostile servers: every size they choose is bounded and named.
#[test]
fn a_chunk_size_of_2_to_the_64_is_an_overflow() {
    // 2^64 = 0x1_0000_0000_0000_0000: 17 hex digits
    let (r, _) = decode_all(Framing::Chunked, &[b"10000000000000000\r\n"]);
    assert_eq!(r, Err(WireError::Chunk(OVERFLOW)));
    // 2^64 - 1 fits (the fold's body limit ends such a stream); leading zeros do not overflow
    let (r, _) = decode_all(Framing::Chunked, &[b"ffffffffffffffff\r\nab"]);
    assert_eq!(r.unwrap(), b"ab");
    let (r, _) = decode_all(Framing::Chunked, &[b"00000000000000000000002\r\nab\r\n"]);
    assert_eq!(r.unwrap(), b"ab");
}

#[test]
fn an_endless_chunk_size_line_is_cut_at_its_limit() {
    // digits then an extension that never ends, 1 KiB per read
    let mut d = BodyDecoder::new(Framing::Chunked);
    let mut first = b"5;".to_vec();
    first.resize(1024, b'x');
    assert!(d.decode(&mut first).is_ok() && d.error().is_none());
    let mut failed = None;
    for i in 0..64 {
        let mut more = vec![b'x'; 1024];
        assert!(d.decode(&mut more).is_ok());
        if let Some(e) = d.error() {
            failed = Some((i, e.clone()));
            break;
        }
    }
    // MAX_CHUNK_LINE = 16 KiB: the 16th read (index 15) crosses it
    assert_eq!(failed, Some((15, WireError::Chunk(LINE_OVER))));
    // a size line of zeros only is bounded as well
    let mut d = BodyDecoder::new(Framing::Chunked);
    let mut zeros = vec![b'0'; MAX_CHUNK_LINE + 1];
    assert_eq!(d.decode(&mut zeros), Ok((0, MAX_CHUNK_LINE)));
    assert_eq!(d.error(), Some(&WireError::Chunk(LINE_OVER)));
    // and the next read is that error
    assert_eq!(d.decode(&mut [b'0']), Err(WireError::Chunk(LINE_OVER)));
}

#[test]
fn the_body_before_a_broken_framing_is_handed_on() {
    // as hyper hands on a chunk before it reads the next size line
    let mut d = BodyDecoder::new(Framing::Chunked);
    let mut buf = b"2\r\nab\r\n10000000000000000\r\n".to_vec();
    let (n, _) = d.decode(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"ab");
    assert_eq!(d.error(), Some(&WireError::Chunk(OVERFLOW)));
}

#[test]
fn malformed_chunks_are_errors() {
    let (r, _) = decode_all(Framing::Chunked, &[b"zz\r\n"]);
    assert_eq!(r, Err(WireError::Chunk(NO_DIGIT)));
    let (r, _) = decode_all(Framing::Chunked, &[b"2\r\nabX"]);
    assert_eq!(r, Err(WireError::Chunk(BODY_CR)));
    let mut trailers = b"0\r\n".to_vec();
    trailers.resize(MAX_TRAILER_BYTES + 10, b'x');
    let (r, _) = decode_all(Framing::Chunked, &[&trailers]);
    assert_eq!(r, Err(WireError::Chunk(TRAILERS)));
}

#[test]
fn response_heads_parse_and_are_bounded() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nbody";
    let h = parse_head(head).unwrap().unwrap();
    assert_eq!((h.status, h.http11, h.len), (200, true, head.len() - 4));
    assert_eq!(h.headers["content-type"], "text/event-stream");
    assert_eq!(Framing::of(h.status, &h.headers), Ok(Framing::Chunked));
    // more bytes needed
    assert!(parse_head(&head[..20]).unwrap().is_none());
    // a header of 1 MB: refused once the buffer holds MAX_HEAD_BYTES
    let mut big = b"HTTP/1.1 200 OK\r\nx-big: ".to_vec();
    big.resize(MAX_HEAD_BYTES, b'a');
    assert_eq!(parse_head(&big).unwrap_err(), WireError::HeadTooLarge);
    assert_eq!(
        WireError::HeadTooLarge.to_string(),
        "message head is too large"
    );
    // more than MAX_HEADERS fields
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(parse_head(&many).unwrap_err(), WireError::HeadTooLarge);
    assert!(matches!(
        parse_head(b"SSH-2.0-OpenSSH\r\n\r\n"),
        Err(WireError::Head(_))
    ));
}

#[test]
fn framing_follows_rfc_9112() {
    let h = |pairs: &[(&str, &str)]| {
        let mut m = reqwest::header::HeaderMap::new();
        for (k, v) in pairs {
            m.append(
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    };
    assert_eq!(
        Framing::of(200, &h(&[("content-length", "12")])),
        Ok(Framing::Length(12))
    );
    assert_eq!(Framing::of(200, &h(&[])), Ok(Framing::Close));
    assert_eq!(Framing::of(204, &h(&[])), Ok(Framing::Length(0)));
    // Transfer-Encoding wins over Content-Length; chunked must be the last coding
    assert_eq!(
        Framing::of(
            200,
            &h(&[
                ("transfer-encoding", "gzip, chunked"),
                ("content-length", "3")
            ])
        ),
        Ok(Framing::Chunked)
    );
    assert_eq!(
        Framing::of(200, &h(&[("transfer-encoding", "gzip")])),
        Ok(Framing::Close)
    );
    assert_eq!(
        Framing::of(200, &h(&[("content-length", "3"), ("content-length", "4")])),
        Err(WireError::ContentLength)
    );
    assert_eq!(
        Framing::of(200, &h(&[("content-length", "18446744073709551616")])),
        Err(WireError::ContentLength)
    );
}

#[test]
fn the_request_is_one_buffer_with_reqwests_fields() {
    let url = reqwest::Url::parse("http://127.0.0.1:8080/v1/chat/completions?x=1").unwrap();
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("accept", "text/event-stream".parse().unwrap());
    let bytes = request("POST", &url, &h, b"{}");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\naccept: text/event-stream\r\ncontent-length: 2\r\n\r\n{}"
    );
    let url = reqwest::Url::parse("http://example.com/v1").unwrap();
    let bytes = request("GET", &url, &reqwest::header::HeaderMap::new(), b"");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "GET /v1 HTTP/1.1\r\nhost: example.com\r\n\r\n"
    );
    // a Host of the scenario's headers is the only one
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("host", "api.internal".parse().unwrap());
    let bytes = request("GET", &url, &h, b"");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "GET /v1 HTTP/1.1\r\nhost: api.internal\r\n\r\n"
    ); // the scenario's Content-Length and Transfer-Encoding are not sent: the framing is the body's
    let mut h = reqwest::header::HeaderMap::new();
    h.insert("transfer-encoding", "chunked".parse().unwrap());
    h.insert("content-length", "5".parse().unwrap());
    h.insert("x-team", "a".parse().unwrap());
    let bytes = request("POST", &url, &h, b"{}");
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "POST /v1 HTTP/1.1\r\nhost: example.com\r\nx-team: a\r\ncontent-length: 2\r\n\r\n{}"
    );
}
