//! Always-on fuzzing: random and mutated byte strings through the same entry points
//! the cargo-fuzz targets use (`open_reader` plain and through zstd/gzip, `open` on a
//! file), for a few seconds per run. No input may panic, hang or allocate
//! without bound; every error must be one line that names the file.
//!
//! The inputs are deterministic (iteration k uses seed k), so a failure prints the
//! seed that reproduces it. LOWTAIL_GARBAGE_SECS changes the time budget per test.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use lowtail_capture::write::{Endian, MoonSniffWriter, NgInterface, PcapNgWriter, PcapWriter};
use lowtail_capture::{open_reader, LinkType, OpenOptions};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// The workspace's seeded `rand` generator (as lowtail-synth uses), with the draws the
/// mutations are written in; a failing seed replays exactly.
struct Rng(Xoshiro256PlusPlus);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }
    fn next(&mut self) -> u64 {
        self.0.random()
    }
    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n.max(1))
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }
}

fn budget() -> Duration {
    let secs = std::env::var("LOWTAIL_GARBAGE_SECS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}

/// Small valid captures of every kind the readers know: the mutations start here.
fn seeds() -> Vec<(Vec<u8>, &'static str)> {
    let frame = |k: u8| -> Vec<u8> { (0..(20 + k as usize * 7)).map(|i| (i as u8).wrapping_mul(k)).collect() };
    let mut out = Vec::new();
    for (nanos, endian) in [(true, Endian::Little), (false, Endian::Big), (true, Endian::Big), (false, Endian::Little)]
    {
        let mut w = PcapWriter::new(Vec::new(), LinkType::Ethernet, nanos, endian, 65535).unwrap();
        for k in 0..6u8 {
            w.write(1_000_000_000 + k as i64 * 1000, &frame(k), 20 + k as u32 * 7).unwrap();
        }
        out.push((w.into_inner(), "seed.pcap"));
    }
    for endian in [Endian::Little, Endian::Big] {
        let mut w = PcapNgWriter::new(Vec::new(), endian).unwrap();
        w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: 0, tsresol: 9, tsoffset_s: 0 }).unwrap();
        w.add_interface(NgInterface { link: LinkType::RawIp, snaplen: 64, tsresol: 0x80 | 20, tsoffset_s: 3 }).unwrap();
        for k in 0..6u8 {
            w.write_enhanced((k % 2) as u32, 5_000_000 * k as i64, &frame(k), 60).unwrap();
        }
        w.write_simple(&frame(3)).unwrap();
        w.section_header().unwrap();
        w.add_interface(NgInterface { link: LinkType::LinuxSll, snaplen: 0, tsresol: 6, tsoffset_s: 0 }).unwrap();
        w.write_enhanced(0, 77_000, &frame(9), 99).unwrap();
        out.push((w.into_inner(), "seed.pcapng"));
    }
    let mut w = MoonSniffWriter::new(Vec::new());
    for k in 0..8 {
        w.write(1_000 * k, k as u32 * 3).unwrap();
    }
    out.push((w.into_inner(), "seed.mscap"));
    out
}

const INTERESTING_U32: [u32; 12] =
    [0, 1, 4, 11, 12, 16, 28, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 16 << 20, (16 << 20) + 1];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, donors: &[(Vec<u8>, &str)]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = [0u8, 0xff, 0x7f, 0x80, 1][rng.below(5)];
            }
            2 if len >= 4 => {
                let i = rng.below(len - 3);
                let v = INTERESTING_U32[rng.below(INTERESTING_U32.len())];
                let b = if rng.chance(2) { v.to_le_bytes() } else { v.to_be_bytes() };
                input[i..i + 4].copy_from_slice(&b);
            }
            3 => input.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let at = rng.below(len);
                let n = rng.below((len - at).min(64) + 1);
                input.drain(at..at + n);
            }
            5 => {
                let at = rng.below(len + 1);
                let n = rng.below(64);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            6 => {
                // splice a piece of another seed in
                let donor = &donors[rng.below(donors.len())].0;
                let from = rng.below(donor.len());
                let n = rng.below(donor.len() - from + 1);
                let at = rng.below(len + 1);
                input.splice(at..at, donor[from..from + n].iter().copied());
            }
            _ => {
                let at = rng.below(len + 1);
                let n = rng.below(200);
                let b = rng.next() as u8;
                input.splice(at..at, std::iter::repeat_n(b, n));
            }
        }
    }
}

/// Read everything an input yields through one entry point; the checks are: no panic,
/// one-line errors naming the file, at most as many items as bytes allow, nothing after
/// an error (reading ends where the damage is), and corruption placed inside the input.
fn exercise(input: &[u8], name: &str, via: Via, force_moonsniff: bool, use_for_each: bool) -> Result<(), String> {
    let options = OpenOptions { force_moonsniff, ..OpenOptions::default() };
    let check_error = |e: &dyn std::fmt::Display| -> Result<(), String> {
        let text = e.to_string();
        if text.contains('\n') || !text.contains(name) {
            return Err(format!("error message is not one line naming {name}: {text:?}"));
        }
        Ok(())
    };
    let mut reader = match open_via(via, input, name, &options) {
        Ok(r) => r,
        Err(e) => return check_error(&e),
    };
    // Every item needs at least 12 input bytes (a MoonSniff record, the smallest),
    // after decompression; compressed input (even garbage behind a zstd/gzip magic)
    // can expand, so only plain input is bounded.
    let limit = 1_000_000;
    let (items, warnings, err) =
        if use_for_each { drain_for_each(&mut reader, &[1, 64, 4096], limit) } else { drain(&mut reader, limit) };
    let compressed = input.starts_with(&[0x1f, 0x8b]) || input.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    if matches!(via, Via::File | Via::Stream) && !compressed && items.len() * 12 > input.len() {
        return Err(format!("{} items out of {} bytes", items.len(), input.len()));
    }
    for w in &warnings {
        check_error(w)?;
    }
    if let Some(e) = err {
        check_error(&e)?;
        if let Ok(Some(_)) = reader.next_item() {
            return Err(format!("an item after the error {e}"));
        }
        if let lowtail_capture::CaptureError::Corrupt { offset, .. } = e {
            if matches!(via, Via::File | Via::Stream) && !compressed && offset >= input.len() as u64 {
                return Err(format!("corruption placed at byte {offset} of a {}-byte input", input.len()));
            }
        }
    }
    Ok(())
}

fn run_for_budget(label: &str, mut one: impl FnMut(&mut Rng) -> (Vec<u8>, &'static str, Via, bool, bool)) {
    let started = Instant::now();
    let mut iterations = 0u64;
    while started.elapsed() < budget() || iterations < 200 {
        let seed = iterations;
        let mut rng = Rng::seeded(seed);
        let (input, name, via, force, each) = one(&mut rng);
        let outcome = catch_unwind(AssertUnwindSafe(|| exercise(&input, name, via, force, each)));
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(msg)) => Some(msg),
            Err(panic) => Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or(panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            )),
        };
        if let Some(msg) = failure {
            let hex: String = input.iter().take(256).map(|b| format!("{b:02x}")).collect();
            panic!("{label}: seed {seed} ({name}, {via:?}, force_moonsniff {force}, for_each {each}): {msg}\ninput ({} bytes): {hex}", input.len());
        }
        iterations += 1;
    }
    eprintln!("{label}: {iterations} inputs in {:.1} s", started.elapsed().as_secs_f64());
}

fn pick_via(rng: &mut Rng) -> Via {
    match rng.below(10) {
        0..=4 => Via::Stream,
        5 | 6 => Via::File,
        7 => Via::Zstd,
        8 => Via::Gzip,
        _ => Via::ZstdFile,
    }
}

#[test]
fn mutated_captures_never_panic() {
    let seeds = seeds();
    run_for_budget("mutated", |rng| {
        let (seed, name) = &seeds[rng.below(seeds.len())];
        let mut input = seed.clone();
        mutate(rng, &mut input, &seeds);
        (input, *name, pick_via(rng), rng.chance(8), rng.chance(2))
    });
}

#[test]
fn random_bytes_behind_every_magic_never_panic() {
    // magics, and magics followed by a version the readers take (pcap 2.4, pcapng 1.0):
    // the random bytes then reach the record and block parsers
    const HEADS: [&[u8]; 14] = [
        &[0xd4, 0xc3, 0xb2, 0xa1],
        &[0xa1, 0xb2, 0xc3, 0xd4],
        &[0x4d, 0x3c, 0xb2, 0xa1],
        &[0xa1, 0xb2, 0x3c, 0x4d],
        &[0x34, 0xcd, 0xb2, 0xa1],
        &[0x0a, 0x0d, 0x0d, 0x0a],
        &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0],
        &[0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4],
        &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0],
        &[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 28, 0x1a, 0x2b, 0x3c, 0x4d, 0, 1, 0, 0],
        &[0x28, 0xb5, 0x2f, 0xfd],
        &[0x1f, 0x8b],
        &[0x1f, 0x8b, 0x08, 0x00],
        &[],
    ];
    run_for_budget("random", |rng| {
        let mut input = HEADS[rng.below(HEADS.len())].to_vec();
        let n = [0usize, 1, 8, 20, 28, 64, 300, 3000][rng.below(8)];
        input.extend((0..n).map(|_| if rng.chance(3) { 0 } else { rng.next() as u8 }));
        let name = ["x.pcap", "x.mscap", "x.mscap.zst"][rng.below(3)];
        (input, name, pick_via(rng), rng.chance(4), rng.chance(2))
    });
}

/// A zstd or gzip stream cut or damaged part-way is a one-line error or a
/// truncation warning, not a hang.
#[test]
fn damaged_compressed_streams() {
    let seeds = seeds();
    for (seed, name) in &seeds {
        for compressed in [zstd_bytes(seed), gzip_bytes(seed)] {
            for cut in (1..compressed.len()).step_by(3) {
                let mut bytes = compressed[..cut].to_vec();
                if cut % 2 == 0 {
                    let i = cut / 2;
                    bytes[i] ^= 0x40;
                }
                let r = open_reader(boxed(bytes), Path::new(name), &OpenOptions::default());
                if let Ok(mut r) = r {
                    let (_, warnings, err) = drain(&mut r, 1000);
                    for w in warnings {
                        assert!(!w.contains('\n') && w.contains(name), "{w}");
                    }
                    if let Some(e) = err {
                        assert!(!e.to_string().contains('\n') && e.to_string().contains(name), "{e}");
                    }
                }
            }
        }
    }
}
