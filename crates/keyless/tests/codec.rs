//! The codec: round trips, and every kind of bad input (truncated, oversized, garbage) answered
//! with the right error and never a panic.

use tlsgate_keyless::codec::*;

fn sign() -> Request {
    Request::Sign {
        key_id: [7; 32],
        algorithm: 0x0403,
        payload: b"to be signed".to_vec(),
    }
}

fn enc_req(id: u32, r: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(&mut out, id, r).unwrap();
    out
}

#[test]
fn requests_round_trip() {
    for (id, req) in [
        (0, sign()),
        (u32::MAX, Request::Ping(vec![1, 2, 3])),
        (5, Request::Ping(vec![])),
    ] {
        let buf = enc_req(id, &req);
        assert_eq!(decode_request(&buf).unwrap(), Some((id, req, buf.len())));
    }
}

#[test]
fn responses_round_trip() {
    let all = [
        Response::Signature(vec![9; 512]),
        Response::Pong(b"x".to_vec()),
        Response::Error(ErrorCode::UnknownKey),
        Response::Error(ErrorCode::UnsupportedAlgorithm),
        Response::Error(ErrorCode::Malformed),
        Response::Error(ErrorCode::Overloaded),
        Response::Error(ErrorCode::Internal),
        Response::Error(ErrorCode::Refused),
        Response::Error(ErrorCode::Other(200)),
    ];
    for (i, resp) in all.into_iter().enumerate() {
        let mut buf = Vec::new();
        encode_response(&mut buf, i as u32, &resp).unwrap();
        assert_eq!(decode_response(&buf).unwrap(), Some((i as u32, resp, buf.len())));
    }
}

#[test]
fn pipelined_frames_decode_one_at_a_time() {
    let mut buf = enc_req(1, &sign());
    buf.extend(enc_req(2, &Request::Ping(vec![])));
    let (id, _, used) = decode_request(&buf).unwrap().unwrap();
    assert_eq!(id, 1);
    let (id, req, rest) = decode_request(&buf[used..]).unwrap().unwrap();
    assert_eq!((id, req), (2, Request::Ping(vec![])));
    assert_eq!(used + rest, buf.len());
}

#[test]
fn wire_layout_is_as_documented() {
    let buf = enc_req(0x01020304, &Request::Ping(vec![0xAA]));
    assert_eq!(
        buf,
        [1, 0, 0, 8, 1, 2, 3, 4, 0x01, 0, 1, 0x02, 0x04, 0, 1, 0xAA],
        "header, opcode item, payload item"
    );
}

#[test]
fn every_truncation_is_incomplete_not_an_error() {
    let buf = enc_req(3, &sign());
    for n in 0..buf.len() {
        assert_eq!(decode_request(&buf[..n]), Ok(None), "prefix of {n} bytes");
    }
}

#[test]
fn oversized_bad_version_and_reserved_are_fatal() {
    let mut buf = enc_req(9, &Request::Ping(vec![]));
    buf[2..4].copy_from_slice(&u16::try_from(MAX_BODY + 1).unwrap().to_be_bytes());
    let e = decode_request(&buf).unwrap_err();
    assert_eq!(
        (e.id, e.kind, e.skip),
        (9, FrameErrorKind::Oversized(MAX_BODY + 1), None)
    );
    let mut buf = enc_req(9, &Request::Ping(vec![]));
    buf[0] = 2;
    assert_eq!(decode_request(&buf).unwrap_err().kind, FrameErrorKind::BadVersion(2));
    let mut buf = enc_req(9, &Request::Ping(vec![]));
    buf[1] = 1;
    assert_eq!(decode_response(&buf).unwrap_err().skip, None);
}

#[test]
fn bad_bodies_are_skippable_malformed_errors() {
    let frame = |id: u32, body: &[u8]| {
        let mut b = vec![1, 0];
        b.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
        b.extend_from_slice(&id.to_be_bytes());
        b.extend_from_slice(body);
        b
    };
    let cases: &[&[u8]] = &[
        &[],                                      // no opcode
        &[0x01, 0, 1, 0x77],                      // unknown opcode
        &[0x01, 0, 2, 0x01, 0x01],                // opcode of the wrong length
        &[0x01, 0, 1, 0x01],                      // sign without key id
        &[0x01, 0, 1, 0x01, 0x02, 0, 3, 1, 2, 3], // short key id
        &[0x01, 0, 1, 0x02, 0x01, 0, 1, 0x02],    // duplicate opcode
        &[0x01, 0, 1, 0x02, 0x04, 0, 9, 1],       // item longer than the body
        &[0x01, 0, 1, 0x02, 0x04],                // truncated item length
    ];
    for body in cases {
        let buf = frame(77, body);
        let e = decode_request(&buf).unwrap_err();
        assert_eq!(e.id, 77);
        assert!(matches!(e.kind, FrameErrorKind::Malformed(_)), "{body:?}: {e}");
        assert_eq!(e.skip, Some(buf.len()));
    }
}

#[test]
fn unknown_items_are_ignored() {
    let mut buf = enc_req(4, &Request::Ping(vec![5]));
    buf.extend_from_slice(&[0x60, 0, 2, 9, 9]);
    let len = u16::from_be_bytes([buf[2], buf[3]]) + 5;
    buf[2..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(decode_request(&buf).unwrap().unwrap().1, Request::Ping(vec![5]));
}

#[test]
fn payloads_over_the_limit_are_not_encoded() {
    let mut out = vec![0xEE];
    let big = Request::Ping(vec![0; MAX_BODY]);
    assert!(encode_request(&mut out, 1, &big).is_err());
    assert_eq!(out, [0xEE], "nothing half-written");
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x1234_5678_u32;
    for len in 0..400 {
        let bytes: Vec<u8> = (0..len)
            .map(|i| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                if i < 2 {
                    [1, 0][i]
                } else {
                    (seed >> 16) as u8
                }
            })
            .collect();
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
    }
}
