//! Tests of `ja4`: FoxIO's published vectors (crates/wire/testdata/ja4_vectors.txt, taken from
//! the pcaps and Python test data of https://github.com/FoxIO-LLC/ja4), the worked example of
//! the specification (technical_details/JA4.md), and malformed input. Sections b and c are
//! checked here as the texts they hash; the hashed fingerprints are checked in tlsgate-tls
//! (`fingerprint`), which has SHA-256.

use super::*;

/// (name, ja4, ja4_r, ClientHello body).
pub(crate) fn vectors() -> Vec<(String, String, String, Vec<u8>)> {
    include_str!("../testdata/ja4_vectors.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = f[3].as_bytes();
            let body = hex
                .chunks(2)
                .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
                .collect();
            (f[0].into(), f[1].into(), f[2].into(), body)
        })
        .collect()
}

#[test]
fn published_vectors_raw_form() {
    let vectors = vectors();
    assert_eq!(vectors.len(), 5);
    for (name, ja4, ja4_r, body) in vectors {
        let input = parse(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(input.raw(), ja4_r, "{name}");
        assert_eq!(&input.section_a()[..], &ja4.as_bytes()[..10], "{name}");
    }
}

#[test]
fn grease_is_recognised() {
    for g in [0x0a0a, 0x1a1a, 0xaaaa, 0xfafa] {
        assert!(is_grease(g));
    }
    for v in [0x0a1a, 0x1301, 0x0000, 0xeded, 0xabab] {
        assert!(!is_grease(v), "{v:04x}");
    }
}

/// A ClientHello body with these parts (random and session ID zeros).
fn hello(version: u16, ciphers: &[u16], extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut b = version.to_be_bytes().to_vec();
    b.extend([0; 32]);
    b.push(0);
    b.extend(u16::try_from(ciphers.len() * 2).unwrap().to_be_bytes());
    for c in ciphers {
        b.extend(c.to_be_bytes());
    }
    b.extend([1, 0]);
    let mut exts = Vec::new();
    for (t, d) in extensions {
        exts.extend(t.to_be_bytes());
        exts.extend(u16::try_from(d.len()).unwrap().to_be_bytes());
        exts.extend(d);
    }
    b.extend(u16::try_from(exts.len()).unwrap().to_be_bytes());
    b.extend(exts);
    b
}

fn alpn(protos: &[&[u8]]) -> Vec<u8> {
    let mut list = Vec::new();
    for p in protos {
        list.push(u8::try_from(p.len()).unwrap());
        list.extend(*p);
    }
    let mut out = u16::try_from(list.len()).unwrap().to_be_bytes().to_vec();
    out.extend(list);
    out
}

fn u16_list(prefix: usize, values: &[u16]) -> Vec<u8> {
    let n = values.len() * 2;
    let mut out = if prefix == 1 {
        vec![u8::try_from(n).unwrap()]
    } else {
        u16::try_from(n).unwrap().to_be_bytes().to_vec()
    };
    for v in values {
        out.extend(v.to_be_bytes());
    }
    out
}

/// The specification's example (technical_details/JA4.md): its cipher and extension lists, its
/// signature algorithms, GREASE added everywhere (which must not count).
#[test]
fn specification_example() {
    let ciphers = [
        0x0a0a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d,
        0x002f, 0x0035,
    ];
    let sigalgs = u16_list(2, &[0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601]);
    let versions = u16_list(1, &[0x3a3a, 0x0304, 0x0303]);
    let mut exts: Vec<(u16, Vec<u8>)> = vec![(0x2a2a, vec![])];
    for t in [
        0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012, 0x002b, 0xff01, 0x000b,
        0x000a, 0x0015,
    ] {
        let data = match t {
            0x0010 => alpn(&[b"h2", b"http/1.1"]),
            0x000d => sigalgs.clone(),
            0x002b => versions.clone(),
            _ => vec![],
        };
        exts.push((t, data));
    }
    let input = parse(&hello(0x0303, &ciphers, &exts)).unwrap();
    assert_eq!(&input.section_a(), b"t13d1516h2");
    assert_eq!(
        input.cipher_text(),
        "002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9"
    );
    assert_eq!(
        input.extension_text(),
        "0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601"
    );
    // Without signature algorithms the text ends without an underscore.
    let no_sigalgs: Vec<_> = exts.iter().filter(|(t, _)| *t != 0x000d).cloned().collect();
    let input = parse(&hello(0x0303, &ciphers, &no_sigalgs)).unwrap();
    assert!(!input.extension_text().contains('_'));
    assert_eq!(&input.section_a(), b"t13d1515h2");
}

#[test]
fn alpn_characters_follow_the_specification() {
    for (value, expected) in [
        (&b"h2"[..], *b"h2"),
        (b"http/1.1", *b"h1"),
        (b"a", *b"aa"),
        (b"", *b"00"),
        // The specification's examples of non-alphanumeric ends.
        (&[0xab], *b"ab"),
        (&[0x20], *b"20"),
        (&[0xab, 0xcd], *b"ad"),
        (&[0x20, 0x61], *b"21"),
        (&[0x30, 0xab], *b"3b"),
        (&[0x61, 0x20], *b"60"),
        (&[0x30, 0x31, 0xab, 0xcd], *b"3d"),
        (&[0x30, 0xab, 0xcd, 0x31], *b"01"),
    ] {
        assert_eq!(alpn_chars(value), expected, "{value:02x?}");
    }
    // No ALPN extension, or an empty list: 00.
    assert_eq!(parse(&hello(0x0303, &[0x1301], &[])).unwrap().alpn, *b"00");
    let empty = parse(&hello(0x0303, &[0x1301], &[(0x0010, vec![0, 0])])).unwrap();
    assert_eq!(empty.alpn, *b"00");
}

#[test]
fn versions_counts_and_empty_sections() {
    // No supported_versions: the legacy version; no SNI: i; nothing to hash: zeros.
    let input = parse(&hello(0x0301, &[], &[])).unwrap();
    assert_eq!(&input.section_a(), b"t10i000000");
    let fp = input.fingerprint(|_| panic!("nothing is hashed"));
    assert_eq!(fp.as_str(), "t10i000000_000000000000_000000000000");
    // SNI and ALPN alone: counted, but section c has nothing left to hash.
    let input = parse(&hello(0x0303, &[0x1301], &[(0, vec![]), (0x0010, alpn(&[b"h2"]))])).unwrap();
    assert_eq!(&input.section_a(), b"t12d0102h2");
    assert!(input
        .fingerprint(|_| [0xab; 32])
        .as_str()
        .ends_with("_abababababab_000000000000"));
    // Unknown version: 00; counts stop at 99.
    let many: Vec<u16> = (1..=120).collect();
    let input = parse(&hello(0x7f00, &many, &[])).unwrap();
    assert_eq!(&input.section_a(), b"t00i990000");
    // supported_versions with GREASE only: the legacy version stays.
    let input = parse(&hello(0x0303, &[], &[(0x002b, u16_list(1, &[0x1a1a]))])).unwrap();
    assert_eq!(input.version, 0x0303);
}

#[test]
fn fingerprint_layout_and_parse() {
    let input = parse(&hello(0x0303, &[0x1301], &[(0x000a, vec![])])).unwrap();
    let fp = input.fingerprint(|_| {
        let mut d = [0; 32];
        d[..6].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab]);
        d
    });
    assert_eq!(fp.as_str(), "t12i010100_0123456789ab_0123456789ab");
    assert_eq!(Ja4::parse(fp.as_str()), Some(fp));
    for bad in [
        "",
        "t13d1516h2_8daaf6152771_02713d6af86",
        "t13d1516h2_8daaf6152771_02713d6af86g",
        "t13d1516h2-8daaf6152771_02713d6af862",
        "x13d1516h2_8daaf6152771_02713d6af862",
        "t13x1516h2_8daaf6152771_02713d6af862",
        "t13d15a6h2_8daaf6152771_02713d6af862",
        "T13D1516H2_8DAAF6152771_02713D6AF862",
    ] {
        assert_eq!(Ja4::parse(bad), None, "{bad:?}");
    }
    assert!(Ja4::parse("t13d1516h2_8daaf6152771_02713d6af862").is_some());
}

#[test]
fn malformed_hellos_are_errors_not_panics() {
    let good = hello(0x0303, &[0x1301], &[(0x000a, vec![1, 2])]);
    // Version, random, empty session ID, one suite, one compression method: 41 bytes, a valid
    // hello without extensions; every other prefix is cut inside a field.
    for n in (0..good.len()).filter(|n| *n != 41) {
        let r = parse(&good[..n]);
        assert!(r.is_err(), "prefix of {n} bytes parsed: {r:?}");
    }
    assert!(parse(&good[..41]).unwrap().extensions.is_empty());
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(parse(&trailing), Err(Ja4Error::TrailingBytes));
    // An extension whose length runs past the block.
    let mut bad = hello(0x0303, &[0x1301], &[(0x000a, vec![1, 2])]);
    let len = bad.len();
    bad[len - 3] = 9;
    assert_eq!(parse(&bad), Err(Ja4Error::BadExtensions));
    // Malformed extension bodies read as empty, never a panic.
    let odd = parse(&hello(0x0303, &[], &[(0x000d, vec![0, 3, 4])]));
    assert_eq!(odd.unwrap().signature_algorithms, Vec::<u16>::new());
    assert_eq!(Ja4Error::Truncated.kind(), "truncated");
}
