//! What the readers refuse, where they stop and when a capture counts as cut: the
//! versions libpcap reads, the link-type field's FCS bits, record and block headers
//! that cannot be right (corruption at an offset, wherever it is), and the one rule
//! for compressed streams (ending early is a cut, a failed checksum is an error).

mod common;

use common::*;
use lowtail_capture::write::{Endian, NgInterface, PcapNgWriter, PcapWriter};
use lowtail_capture::{CaptureError, LinkType, OpenOptions};

const SNAPLEN: u32 = 262_144;

/// A pcap of `n` 60-byte frames (little-endian, ns); record k starts at 24 + 76·k.
fn pcap_of(n: usize) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, true, Endian::Little, SNAPLEN).unwrap();
    for k in 0..n {
        w.write(k as i64 * 1000, &[k as u8; 60], 60).unwrap();
    }
    w.into_inner()
}

fn record_at(k: usize) -> usize {
    24 + 76 * k
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn read_all(bytes: &[u8], name: &str) -> (Vec<Got>, Vec<String>, Option<CaptureError>, bool) {
    let mut r = open_via(Via::Stream, bytes, name, &OpenOptions::default()).unwrap();
    let (got, warnings, err) = drain(&mut r, usize::MAX);
    (got, warnings, err, r.is_cut())
}

fn corrupt_offset(err: &Option<CaptureError>) -> u64 {
    match err {
        Some(CaptureError::Corrupt { offset, .. }) => *offset,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn pcap_versions_as_libpcap() {
    for (major, minor, read) in [(2, 4, true), (2, 2, true), (2, 0, true), (543, 0, true), (1, 0, false), (3, 0, false)]
    {
        let mut bytes = pcap_of(3);
        bytes[4..6].copy_from_slice(&u16::to_le_bytes(major));
        bytes[6..8].copy_from_slice(&u16::to_le_bytes(minor));
        match open_via(Via::Stream, &bytes, "v.pcap", &OpenOptions::default()) {
            Ok(mut r) => {
                assert!(read, "{major}.{minor} was read");
                assert_eq!(drain(&mut r, 10).0.len(), 3);
            }
            Err(e) => {
                assert!(!read, "{major}.{minor}: {e}");
                assert!(matches!(e, CaptureError::UnsupportedVersion { major: m, .. } if m == major), "{e:?}");
                assert!(e.to_string().contains(&format!("version {major}.{minor}")), "{e}");
            }
        }
    }
}

/// LINKTYPE in the low 16 bits; above it the FCS length and its flag (and reserved
/// bits). Frames that carry an FCS read as they are: the id decoder stops at the
/// datagram's end.
#[test]
fn pcap_link_type_field_keeps_fcs_bits_apart() {
    for field in [0x3000_0001u32, 0x4000_0001, 0x1400_0001, 0x0000_0001] {
        let mut bytes = pcap_of(2);
        put_u32(&mut bytes, 20, field);
        let (got, warnings, err, cut) = read_all(&bytes, "fcs.pcap");
        assert!(err.is_none() && warnings.is_empty() && !cut, "{field:#x}: {err:?} {warnings:?}");
        assert!(got.iter().all(|g| matches!(g, Got::Frame { link: LinkType::Ethernet, .. })), "{field:#x}");
    }
    let mut bytes = pcap_of(1);
    put_u32(&mut bytes, 20, 0x3000_0069); // 802.11 with an FCS length: still 802.11
    let err = open_via(Via::Stream, &bytes, "wifi.pcap", &OpenOptions::default()).err().unwrap();
    assert!(matches!(err, CaptureError::UnsupportedLinkType { linktype: 105, .. }), "{err:?}");
}

/// The case: a record length of 70,000 (under the 262,144 snap length) half-way
/// through. It is corruption at that record's offset, not a capture killed at the end.
#[test]
fn pcap_record_length_that_cannot_be_right_mid_file() {
    let n = 2000;
    for (field, value) in [(8, 70_000u32), (8, SNAPLEN + 1), (8, 0x7fff_ffff), (12, 59)] {
        let mut bytes = pcap_of(n);
        put_u32(&mut bytes, record_at(1000) + field, value);
        for via in [Via::Stream, Via::File, Via::Gzip] {
            let mut r = open_via(via, &bytes, "mid.pcap", &OpenOptions::default()).unwrap();
            for use_for_each in [false, true] {
                let (got, _, err) = if use_for_each {
                    drain_for_each(&mut open_via(via, &bytes, "mid.pcap", &OpenOptions::default()).unwrap(), &[7], n)
                } else {
                    drain(&mut r, n)
                };
                assert_eq!(got.len(), 1000, "field {field} = {value}");
                assert_eq!(corrupt_offset(&err), record_at(1000) as u64, "field {field} = {value}");
                let text = err.unwrap().to_string();
                assert!(text.contains("mid.pcap") && text.contains(&format!("byte {}", record_at(1000))), "{text}");
            }
        }
    }
}

/// Near the end, a record that would run past the end of the file is a cut only when
/// its header is plausible; with an impossible length it is corruption too.
#[test]
fn pcap_past_the_end_is_a_cut_only_when_plausible() {
    let bytes = pcap_of(100);
    let cut_plain = &bytes[..bytes.len() - 30];
    let (got, warnings, err, cut) = read_all(cut_plain, "cut.pcap");
    assert!(err.is_none() && cut && got.len() == 99, "{err:?}");
    assert!(warnings.len() == 1 && warnings[0].contains("truncated"), "{warnings:?}");

    let mut damaged = bytes.clone();
    put_u32(&mut damaged, record_at(98) + 8, 70_000);
    let (got, _, err, cut) = read_all(&damaged, "end.pcap");
    assert_eq!(got.len(), 98);
    assert_eq!(corrupt_offset(&err), record_at(98) as u64);
    assert!(!cut);

    let whole = read_all(&bytes, "whole.pcap");
    assert!(whole.2.is_none() && !whole.3 && whole.1.is_empty() && whole.0.len() == 100);
}

fn ng_section(endian: Endian, packets: usize, first_ts: i64) -> PcapNgWriter<Vec<u8>> {
    let mut w = PcapNgWriter::new(Vec::new(), endian).unwrap();
    w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol: 9, tsoffset_s: 0 }).unwrap();
    for k in 0..packets {
        w.write_enhanced(0, first_ts + k as i64, &[k as u8; 60], 60).unwrap();
    }
    w
}

/// Section header: type, length, byte-order magic, then major and minor (u16 each).
fn set_section_version(bytes: &mut [u8], at: usize, major: u16, minor: u16) {
    bytes[at + 12..at + 14].copy_from_slice(&major.to_le_bytes());
    bytes[at + 14..at + 16].copy_from_slice(&minor.to_le_bytes());
}

/// libpcap reads a first section of version 1.0 or 1.2 (Wireshark too), and refuses
/// 0.1, 1.1 and 2.0.
#[test]
fn pcapng_first_section_versions_as_libpcap() {
    for (major, minor, read) in [(1, 0, true), (1, 2, true), (0, 1, false), (1, 1, false), (2, 0, false)] {
        let mut bytes = ng_section(Endian::Little, 3, 0).into_inner();
        set_section_version(&mut bytes, 0, major, minor);
        match open_via(Via::Stream, &bytes, "v.pcapng", &OpenOptions::default()) {
            Ok(mut r) => {
                assert!(read, "{major}.{minor} was read");
                assert_eq!(drain(&mut r, 10).0.len(), 3);
            }
            Err(e) => {
                assert!(!read, "{major}.{minor}: {e}");
                assert!(
                    matches!(e, CaptureError::UnsupportedVersion { major: m, minor: n, offset: 0, .. } if (m, n) == (major, minor)),
                    "{e:?}"
                );
            }
        }
    }
}

/// A later section of major version 2 ends the reading at its offset (libpcap stops
/// there with an error; what came before is read); a later 1.1 section is read on, as
/// libpcap checks only the major version of later sections.
#[test]
fn pcapng_later_section_of_another_major_version_stops_the_reading() {
    let first = ng_section(Endian::Little, 5, 0).into_inner();
    for (major, minor, stops) in [(2, 0, true), (1, 1, false), (1, 2, false)] {
        let second = ng_section(Endian::Little, 4, 100).into_inner();
        let mut bytes = [first.clone(), second].concat();
        set_section_version(&mut bytes, first.len(), major, minor);
        let (got, _, err, cut) = read_all(&bytes, "two.pcapng");
        assert!(!cut);
        if stops {
            assert_eq!(got.len(), 5);
            match err {
                Some(CaptureError::UnsupportedVersion { offset, major: 2, .. }) => {
                    assert_eq!(offset, first.len() as u64)
                }
                other => panic!("{other:?}"),
            }
        } else {
            assert!(err.is_none(), "{major}.{minor}: {err:?}");
            assert_eq!(got.len(), 9);
        }
    }
}

/// Enhanced packet block k of `ng_section` (no options, 60-byte frames: 92 bytes each)
/// starts after the section header (28) and the interface block (32, with if_tsresol).
fn ng_block_at(bytes: &[u8], k: usize) -> usize {
    let mut at = 0;
    let mut seen = 0;
    loop {
        let block_type = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if block_type == 6 {
            if seen == k {
                return at;
            }
            seen += 1;
        }
        at += u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    }
}

#[test]
fn pcapng_block_that_cannot_be_right_mid_file() {
    let whole = ng_section(Endian::Little, 2000, 0).into_inner();
    let at = ng_block_at(&whole, 1000);
    // (offset in the block, value): block length run far past its trailer (and past the
    // end of the file), captured length beyond the frame, beyond the block
    for (field, value) in [(4, 70_000u32), (4, (whole.len() - at + 400) as u32), (20, 61), (20, 4000)] {
        let mut bytes = whole.clone();
        put_u32(&mut bytes, at + field, value);
        for via in [Via::Stream, Via::Zstd] {
            let mut r = open_via(via, &bytes, "mid.pcapng", &OpenOptions::default()).unwrap();
            let (got, _, err) = drain(&mut r, usize::MAX);
            assert_eq!(got.len(), 1000, "field {field} = {value}");
            assert_eq!(corrupt_offset(&err), at as u64, "field {field} = {value}: {err:?}");
            assert!(!r.is_cut());
        }
    }
    // an interface snap length the packet exceeds
    let mut w = PcapNgWriter::new(Vec::new(), Endian::Little).unwrap();
    w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 64, tsresol: 9, tsoffset_s: 0 }).unwrap();
    w.write_enhanced(0, 1, &[1; 60], 60).unwrap();
    w.write_enhanced(0, 2, &[2; 60], 60).unwrap();
    let mut bytes = w.into_inner();
    let second = ng_block_at(&bytes, 1);
    put_u32(&mut bytes, second + 20, 68);
    put_u32(&mut bytes, second + 24, 68);
    let (got, _, err, _) = read_all(&bytes, "snap.pcapng");
    assert_eq!(got.len(), 1);
    assert_eq!(corrupt_offset(&err), second as u64);

    let cut = &whole[..whole.len() - 50];
    let (got, warnings, err, is_cut) = read_all(cut, "cut.pcapng");
    assert!(err.is_none() && is_cut && got.len() == 1999, "{err:?}");
    assert!(warnings.iter().any(|w| w.contains("truncated")), "{warnings:?}");
}

/// One rule for compressed streams: one that ends early is a capture cut short (the
/// records before, `is_cut`, a warning), from its first byte on; a checksum that fails
/// is an error, even after every record was handed out.
#[test]
fn compressed_streams_cut_or_damaged() {
    // several zstd blocks (128 KiB of input each) to cut between
    let plain = pcap_of(10_000);
    for (codec, compressed) in [("zstd", zstd_bytes(&plain)), ("gzip", gzip_bytes(&plain))] {
        for cut in [compressed.len() - 1, compressed.len() * 2 / 3] {
            let (got, warnings, err, is_cut) = read_all_compressed(&compressed[..cut]);
            assert!(err.is_none() && is_cut, "{codec} cut at {cut}: {err:?}");
            assert!(got.len() < 10_000 || cut == compressed.len() - 1, "{codec}");
            assert!(warnings.iter().any(|w| w.contains("ends early")), "{warnings:?}");
        }
        // cut before a whole capture header came out: a truncated header, as for a plain file
        for cut in [5, 9, 12] {
            let err = lowtail_capture::open_reader(
                boxed(compressed[..cut].to_vec()),
                std::path::Path::new("c.pcap.z"),
                &OpenOptions::default(),
            )
            .err()
            .unwrap_or_else(|| panic!("{codec} cut at {cut} opened"));
            assert!(matches!(err, CaptureError::TruncatedHeader { .. }), "{codec} cut at {cut}: {err:?}");
        }
    }
    // gzip: the CRC-32 and length of the member are its last 8 bytes
    let mut gz = gzip_bytes(&plain);
    let crc_at = gz.len() - 8;
    gz[crc_at] ^= 0x55;
    let (got, _, err, _) = read_all_compressed(&gz);
    assert_eq!(got.len(), 10_000);
    assert!(matches!(err, Some(CaptureError::Decompress { codec: "gzip", .. })), "{err:?}");
    // zstd with its optional content checksum (the last 4 bytes of the frame)
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    encoder.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut encoder, &plain).unwrap();
    let mut zst = encoder.finish().unwrap();
    let (got, _, err, _) = read_all_compressed(&zst);
    assert!(err.is_none() && got.len() == 10_000, "{err:?}");
    let last = zst.len() - 1;
    zst[last] ^= 0x55;
    let (_, _, err, _) = read_all_compressed(&zst);
    assert!(matches!(err, Some(CaptureError::Decompress { codec: "zstd", .. })), "{err:?}");
    assert!(err.unwrap().to_string().contains("c.pcap.z"));
}

fn read_all_compressed(bytes: &[u8]) -> (Vec<Got>, Vec<String>, Option<CaptureError>, bool) {
    let mut r =
        lowtail_capture::open_reader(boxed(bytes.to_vec()), std::path::Path::new("c.pcap.z"), &OpenOptions::default())
            .unwrap();
    let (got, warnings, err) = drain(&mut r, usize::MAX);
    (got, warnings, err, r.is_cut())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]

    /// Whatever record's length field goes wrong, and however (more than its frame, more
    /// than the snap length, more than any record), the reading stops at that record's
    /// offset with every record before it read — never a "truncated" cut at the end.
    #[test]
    fn a_wrong_record_length_anywhere_is_corruption_at_its_offset(
        n in 1usize..300, which in proptest::prelude::any::<proptest::sample::Index>(),
        caplen in 61u32..=u32::MAX, use_for_each: bool, budget in 1usize..40,
    ) {
        let k = which.index(n);
        let mut bytes = pcap_of(n);
        put_u32(&mut bytes, record_at(k) + 8, caplen);
        let mut r = open_via(Via::Stream, &bytes, "p.pcap", &OpenOptions::default()).unwrap();
        let (got, warnings, err) =
            if use_for_each { drain_for_each(&mut r, &[budget], usize::MAX) } else { drain(&mut r, usize::MAX) };
        proptest::prop_assert_eq!(got.len(), k);
        proptest::prop_assert_eq!(corrupt_offset(&err), record_at(k) as u64);
        proptest::prop_assert!(warnings.is_empty() && !r.is_cut(), "{:?}", warnings);
    }
}
