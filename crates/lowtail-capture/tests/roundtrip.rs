//! Write with `lowtail_capture::write`, read back through every path (file,
//! stream, zstd, gzip, next_item and for_each): the same frames, timestamps converted
//! exactly, truncation reported as a warning.

mod common;

use common::*;
use lowtail_capture::write::{units_per_second, Endian, MoonSniffWriter, NgInterface, PcapNgWriter, PcapWriter};
use lowtail_capture::{CaptureError, Compression, Format, LinkType, OpenOptions};
use proptest::prelude::*;

const LINKS: [LinkType; 6] =
    [LinkType::Ethernet, LinkType::RawIp, LinkType::Null, LinkType::Loop, LinkType::LinuxSll, LinkType::LinuxSll2];

fn frames() -> impl Strategy<Value = Vec<(i64, Vec<u8>, u32)>> {
    // (timestamp ns within the 32-bit seconds pcap can hold, bytes, extra wire bytes)
    prop::collection::vec(
        (0i64..(u32::MAX as i64) * 1_000_000_000, prop::collection::vec(any::<u8>(), 0..200), 0u32..100),
        0..60,
    )
}

fn any_via() -> impl Strategy<Value = Via> {
    prop::sample::select(ALL_VIAS.to_vec())
}

fn expected_compression(via: Via) -> Compression {
    match via {
        Via::File | Via::Stream => Compression::None,
        Via::Zstd | Via::ZstdFile => Compression::Zstd,
        Via::Gzip => Compression::Gzip,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn pcap_round_trip(records in frames(), nanos: bool, big: bool, link_ix in 0usize..6,
                       snaplen in prop_oneof![Just(262_144u32), 1u32..300], via in any_via(),
                       budgets in prop::collection::vec(1usize..50, 1..4)) {
        let link = LINKS[link_ix];
        let mut w = PcapWriter::new(Vec::new(), link, nanos, if big { Endian::Big } else { Endian::Little }, snaplen).unwrap();
        for (ts, data, extra) in &records {
            w.write(*ts, data, data.len() as u32 + extra).unwrap();
        }
        let bytes = w.into_inner();
        let want: Vec<Got> = records.iter().map(|(ts, data, extra)| Got::Frame {
            ts_ns: if nanos { *ts } else { ts / 1000 * 1000 },
            link,
            data: data[..data.len().min(snaplen as usize)].to_vec(),
            orig_len: data.len() as u32 + extra,
        }).collect();

        let mut r = open_via(via, &bytes, "x.pcap", &OpenOptions::default()).unwrap();
        prop_assert_eq!(r.format(), if nanos { Format::PcapNano } else { Format::PcapMicro });
        prop_assert_eq!(r.compression(), expected_compression(via));
        prop_assert_eq!(r.snaplen(), snaplen);
        let (got, warnings, err) = drain(&mut r, usize::MAX);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert!(warnings.is_empty(), "{:?}", warnings);
        prop_assert_eq!(&got, &want);

        let mut r = open_via(via, &bytes, "x.pcap", &OpenOptions::default()).unwrap();
        let (got, warnings, err) = drain_for_each(&mut r, &budgets, usize::MAX);
        prop_assert!(err.is_none() && warnings.is_empty());
        prop_assert_eq!(&got, &want);
    }

    /// A capture cut anywhere after its header reads as the records before the cut,
    /// with a warning exactly when the cut splits a record; never an error.
    #[test]
    fn pcap_cut_anywhere(records in frames(), nanos: bool, big: bool, cut_at in any::<prop::sample::Index>(),
                         via in prop::sample::select(vec![Via::File, Via::Stream, Via::Gzip]),
                         use_for_each: bool) {
        let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, nanos, if big { Endian::Big } else { Endian::Little }, 65535).unwrap();
        let mut ends = vec![24usize];
        for (ts, data, _) in &records {
            w.write(*ts, data, data.len() as u32).unwrap();
            ends.push(ends.last().unwrap() + 16 + data.len());
        }
        let bytes = w.into_inner();
        let cut = 24 + cut_at.index(bytes.len() - 24 + 1);
        let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
        let mut r = open_via(via, &bytes[..cut], "cut.pcap", &OpenOptions::default()).unwrap();
        let (got, warnings, err) = if use_for_each { drain_for_each(&mut r, &[7], usize::MAX) } else { drain(&mut r, usize::MAX) };
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(got.len(), whole);
        let mid_record = !ends.contains(&cut);
        prop_assert_eq!(warnings.len(), mid_record as usize, "{:?}", warnings);
        prop_assert_eq!(r.is_cut(), mid_record);
        if mid_record {
            prop_assert!(warnings[0].contains("truncated"), "{}", warnings[0]);
        }
    }

    #[test]
    fn pcapng_round_trip(sections in prop::collection::vec((any::<bool>(), prop::collection::vec(
                (0usize..6, prop_oneof![Just(9u8), Just(6u8), Just(3u8), Just(0u8), Just(12u8), 0x80u8..0x80 + 40],
                 -100i64..100, prop_oneof![Just(0u32), 1u32..300]), 1..4),
                prop::collection::vec((any::<prop::sample::Index>(), 0i64..(1i64 << 62),
                    prop::collection::vec(any::<u8>(), 0..120), prop::bool::weighted(0.1)), 0..40)), 1..4),
            via in any_via()) {
        let mut out: Option<PcapNgWriter<Vec<u8>>> = None;
        let mut want = Vec::new();
        let mut simple = 0;
        for (big, interfaces, packets) in &sections {
            let endian = if *big { Endian::Big } else { Endian::Little };
            // A new section may change the byte order: start it on the bytes so far.
            let mut w = match out.take() {
                None => PcapNgWriter::new(Vec::new(), endian).unwrap(),
                Some(prev) => PcapNgWriter::new(prev.into_inner(), endian).unwrap(),
            };
            for &(link_ix, tsresol, tsoffset_s, snaplen) in interfaces {
                w.add_interface(NgInterface { link: LINKS[link_ix], snaplen, tsresol, tsoffset_s }).unwrap();
            }
            for (which, ts_ns, data, as_simple) in packets {
                if *as_simple {
                    w.write_simple(data).unwrap();
                    simple += 1;
                    continue;
                }
                let i = which.index(interfaces.len());
                let (link_ix, tsresol, tsoffset_s, snaplen) = interfaces[i];
                let units = units_per_second(tsresol);
                // raw units for a time (kept within the 64 bits a block holds), then the
                // reader's answer computed independently
                let limit = ((u64::MAX as u128 * 1_000_000_000) / units).min(1 << 62);
                let raw = ((*ts_ns as u128 % limit) * units / 1_000_000_000) as u64;
                w.write_enhanced_raw(i as u32, raw, data, data.len() as u32 + 3).unwrap();
                let keep = if snaplen == 0 { data.len() } else { data.len().min(snaplen as usize) };
                want.push(Got::Frame {
                    ts_ns: (raw as u128 * 1_000_000_000 / units) as i64 + tsoffset_s * 1_000_000_000,
                    link: LINKS[link_ix],
                    data: data[..keep].to_vec(),
                    orig_len: data.len() as u32 + 3,
                });
            }
            out = Some(w);
        }
        let bytes = out.unwrap().into_inner();
        let mut r = open_via(via, &bytes, "x.pcapng", &OpenOptions::default()).unwrap();
        prop_assert_eq!(r.format(), Format::PcapNg);
        let (got, warnings, err) = drain(&mut r, usize::MAX);
        prop_assert!(err.is_none(), "{:?}", err);
        prop_assert_eq!(&got, &want);
        if simple > 0 {
            prop_assert_eq!(warnings.len(), 1);
            prop_assert!(warnings[0].contains(&format!("{simple} simple packet blocks")), "{}", warnings[0]);
        } else {
            prop_assert!(warnings.is_empty(), "{:?}", warnings);
        }
    }

    #[test]
    fn moonsniff_round_trip(records in prop::collection::vec((0i64..i64::MAX, any::<u32>()), 0..300),
                            via in any_via(), by_name: bool, extra in 0usize..12) {
        let mut w = MoonSniffWriter::new(Vec::new());
        for (ts, id) in &records {
            w.write(*ts, *id).unwrap();
        }
        let mut bytes = w.into_inner();
        bytes.extend(std::iter::repeat_n(0xee, extra));
        // A MoonSniff file has no magic: the name or the option says what it is.
        let options = OpenOptions { force_moonsniff: !by_name, ..OpenOptions::default() };
        let name = if by_name { "x.mscap" } else { "x.bin" };
        // records whose bytes happen to begin with a pcap/pcapng/zstd/gzip magic are another story
        let first4 = bytes.get(..4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
        prop_assume!(!matches!(first4, Some(0xa1b2c3d4 | 0xd4c3b2a1 | 0xa1b23c4d | 0x4d3cb2a1 | 0xa1b2cd34 | 0x34cdb2a1 | 0x0a0d0d0a)));
        prop_assume!(!matches!(bytes.get(..2), Some([0x1f, 0x8b])) && !matches!(bytes.get(..4), Some([0x28, 0xb5, 0x2f, 0xfd])));
        match open_via(via, &bytes, name, &options) {
            Err(CaptureError::Empty { .. }) => prop_assert!(bytes.is_empty()),
            Err(e) => prop_assert!(false, "{}", e),
            Ok(mut r) => {
                prop_assert_eq!(r.format(), Format::MoonSniff);
                let (got, warnings, err) = drain(&mut r, usize::MAX);
                prop_assert!(err.is_none());
                let want: Vec<Got> = records.iter().map(|&(ts_ns, id)| Got::Record { ts_ns, id }).collect();
                prop_assert_eq!(got, want);
                prop_assert_eq!(warnings.len(), (extra % 12 != 0) as usize);
            }
        }
    }
}

/// The readers must not depend on how many bytes each read returns.
#[test]
fn pcap_and_pcapng_from_a_dribbling_stream() {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, true, Endian::Little, 65535).unwrap();
    let mut ng = PcapNgWriter::new(Vec::new(), Endian::Big).unwrap();
    ng.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol: 9, tsoffset_s: 0 }).unwrap();
    for k in 0..500i64 {
        let data: Vec<u8> = (0..(k % 97) as u8).collect();
        w.write(k * 1000, &data, data.len() as u32).unwrap();
        ng.write_enhanced(0, k * 1000, &data, data.len() as u32).unwrap();
    }
    for bytes in [w.into_inner(), ng.into_inner()] {
        let mut whole =
            lowtail_capture::open_reader(boxed(bytes.clone()), std::path::Path::new("a"), &OpenOptions::default())
                .unwrap();
        let want = drain(&mut whole, usize::MAX).0;
        assert_eq!(want.len(), 500);
        for step in [1, 3, 7, 4096] {
            let d = Dribble { bytes: bytes.clone(), pos: 0, step };
            let mut r =
                lowtail_capture::open_reader(Box::new(d), std::path::Path::new("a"), &OpenOptions::default()).unwrap();
            assert_eq!(drain(&mut r, usize::MAX).0, want, "step {step}");
        }
    }
}

/// Records bigger than the read buffer still come out whole, and a file of many
/// records crosses buffer refills correctly.
#[test]
fn pcap_file_larger_than_one_window() {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, true, Endian::Little, 262_144).unwrap();
    let n = 20_000;
    for k in 0..n {
        let data = vec![(k % 251) as u8; 1000 + (k % 13)];
        w.write(k as i64, &data, data.len() as u32).unwrap();
    }
    let bytes = w.into_inner();
    assert!(bytes.len() > 16 << 20);
    for via in [Via::File, Via::Stream] {
        let mut r = open_via(via, &bytes, "big.pcap", &OpenOptions::default()).unwrap();
        let (got, warnings, err) = drain_for_each(&mut r, &[4096, 1, 333], usize::MAX);
        assert!(err.is_none() && warnings.is_empty());
        assert_eq!(got.len(), n);
        for (k, g) in got.iter().enumerate() {
            match g {
                Got::Frame { ts_ns, data, .. } => {
                    assert_eq!(*ts_ns, k as i64);
                    assert_eq!(data.len(), 1000 + (k % 13));
                    assert!(data.iter().all(|&b| b == (k % 251) as u8));
                }
                other => panic!("{other:?}"),
            }
        }
    }
}

/// A compressed capture cut short (its writer killed mid-stream) reads as the records
/// the remaining bytes decompress to, a prefix of the whole, with a warning that the
/// stream ends early; never an error.
#[test]
fn compressed_capture_cut_short() {
    let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, true, Endian::Little, 65535).unwrap();
    // incompressible frames, so the stream holds many blocks to cut between
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for k in 0..30_000i64 {
        let data: Vec<u8> = (0..60)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        w.write(k * 1000, &data, 60).unwrap();
    }
    let plain = w.into_inner();
    let whole = drain(&mut open_via(Via::Stream, &plain, "w.pcap", &OpenOptions::default()).unwrap(), usize::MAX).0;
    for compressed in [zstd_bytes(&plain), gzip_bytes(&plain)] {
        for cut in [compressed.len() / 3, compressed.len() / 2, compressed.len() - 5, compressed.len() - 1] {
            let mut r = lowtail_capture::open_reader(
                boxed(compressed[..cut].to_vec()),
                std::path::Path::new("cut.pcap.zst"),
                &OpenOptions::default(),
            )
            .unwrap();
            let (got, warnings, err) = drain(&mut r, usize::MAX);
            assert!(err.is_none(), "cut at {cut}: {err:?}");
            // (a gzip cut inside its 8-byte trailer still holds every record)
            assert!(got.len() > 1000 && got[..] == whole[..got.len()], "cut at {cut}: {} records", got.len());
            assert!(
                warnings.iter().any(|w| w.contains("stream ends early") && w.contains("cut.pcap.zst")),
                "{warnings:?}"
            );
        }
    }
}

proptest! {
    /// Nanosecond times written to a pcapng interface read back rounded down to its
    /// resolution, and a time read from such a capture is written back unchanged, for
    /// every resolution (2^-n s units are not whole nanoseconds).
    #[test]
    fn pcapng_ns_timestamps_round_trip(ts in 0i64..(1i64 << 60), tsresol in prop_oneof![
            Just(9u8), Just(6u8), Just(12u8), 0x80u8..0x80 + 40], offset in -5i64..5) {
        let units = units_per_second(tsresol);
        prop_assume!(ts as u128 * units / 1_000_000_000 < u64::MAX as u128 / 2);
        let mut w = PcapNgWriter::new(Vec::new(), Endian::Big).unwrap();
        w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol, tsoffset_s: offset }).unwrap();
        let ts = ts + offset * 1_000_000_000;
        w.write_enhanced(0, ts, &[1, 2, 3], 3).unwrap();
        let bytes = w.into_inner();
        let first = match &drain(&mut open_via(Via::Stream, &bytes, "a", &OpenOptions::default()).unwrap(), 9).0[0] {
            Got::Frame { ts_ns, .. } => *ts_ns,
            other => panic!("{other:?}"),
        };
        // rounded down, by less than one unit
        prop_assert!(first <= ts && ((ts - first) as u128) * units < 1_000_000_000, "{} -> {}", ts, first);
        let mut w = PcapNgWriter::new(Vec::new(), Endian::Little).unwrap();
        w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol, tsoffset_s: offset }).unwrap();
        w.write_enhanced(0, first, &[1, 2, 3], 3).unwrap();
        let again = match &drain(&mut open_via(Via::Stream, &w.into_inner(), "a", &OpenOptions::default()).unwrap(), 9).0[0] {
            Got::Frame { ts_ns, .. } => *ts_ns,
            other => panic!("{other:?}"),
        };
        prop_assert_eq!(again, first);
    }
}
