//! Writers for the formats lowtail reads: the testbed's timestamper, the synthetic
//! capture generator and the tests all produce their files through these.

use std::io::{self, Write};

use crate::link::LinkType;

/// Byte order of a written file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl Endian {
    fn u16(self, v: u16) -> [u8; 2] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn u32(self, v: u32) -> [u8; 4] {
        match self {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn i32(self, v: i32) -> [u8; 4] {
        self.u32(v as u32)
    }
}

/// Classic pcap writer (microsecond or nanosecond magic, either byte order).
pub struct PcapWriter<W: Write> {
    out: W,
    nanos: bool,
    endian: Endian,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    /// Write the file header: `nanos` picks the nanosecond magic, `snaplen` cuts frames.
    pub fn new(mut out: W, link: LinkType, nanos: bool, endian: Endian, snaplen: u32) -> io::Result<Self> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&endian.u32(magic));
        h.extend_from_slice(&endian.u16(2));
        h.extend_from_slice(&endian.u16(4));
        h.extend_from_slice(&endian.i32(0));
        h.extend_from_slice(&endian.u32(0));
        h.extend_from_slice(&endian.u32(snaplen));
        h.extend_from_slice(&endian.u32(link.to_pcap() as u32));
        out.write_all(&h)?;
        Ok(PcapWriter { out, nanos, endian, snaplen })
    }

    /// Write one frame; `data` is cut to the snap length, `orig_len` is the wire length.
    pub fn write(&mut self, ts_ns: i64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let caplen = data.len().min(self.snaplen as usize);
        let secs = ts_ns.div_euclid(1_000_000_000) as u32;
        let frac_ns = ts_ns.rem_euclid(1_000_000_000) as u32;
        let frac = if self.nanos { frac_ns } else { frac_ns / 1_000 };
        let e = self.endian;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&e.u32(secs));
        rec[4..8].copy_from_slice(&e.u32(frac));
        rec[8..12].copy_from_slice(&e.u32(caplen as u32));
        rec[12..16].copy_from_slice(&e.u32(orig_len));
        self.out.write_all(&rec)?;
        self.out.write_all(&data[..caplen])
    }

    /// The underlying writer (flush or finish it yourself).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// A pcapng interface as the writer declares it.
#[derive(Debug, Clone)]
pub struct NgInterface {
    /// The interface's link type.
    pub link: LinkType,
    /// Snap length (0: none).
    pub snaplen: u32,
    /// Raw `if_tsresol` byte: 9 = ns, 6 = µs, 0x80 | n = 2^-n s.
    pub tsresol: u8,
    /// `if_tsoffset` in seconds.
    pub tsoffset_s: i64,
}

/// pcapng writer: one section, any number of interfaces, enhanced and simple packet
/// blocks, little or big endian.
pub struct PcapNgWriter<W: Write> {
    out: W,
    endian: Endian,
    interfaces: Vec<NgInterface>,
}

impl<W: Write> PcapNgWriter<W> {
    /// Write the first section header; interfaces follow with `add_interface`.
    pub fn new(out: W, endian: Endian) -> io::Result<Self> {
        let mut w = PcapNgWriter { out, endian, interfaces: Vec::new() };
        w.section_header()?;
        Ok(w)
    }

    /// Start a new section (interfaces are forgotten, as the format says).
    pub fn section_header(&mut self) -> io::Result<()> {
        let e = self.endian;
        let mut body = Vec::new();
        body.extend_from_slice(&e.u32(0x1a2b_3c4d));
        body.extend_from_slice(&e.u16(1));
        body.extend_from_slice(&e.u16(0));
        body.extend_from_slice(&(-1i64).to_le_bytes());
        self.interfaces.clear();
        self.block(0x0a0d_0d0a, &body)
    }

    /// Declare an interface; returns its id for `write_enhanced`.
    pub fn add_interface(&mut self, iface: NgInterface) -> io::Result<u32> {
        let e = self.endian;
        let mut body = Vec::new();
        body.extend_from_slice(&e.u16(iface.link.to_pcap() as u16));
        body.extend_from_slice(&e.u16(0));
        body.extend_from_slice(&e.u32(iface.snaplen));
        // if_tsresol (code 9, length 1, padded to 4)
        body.extend_from_slice(&e.u16(9));
        body.extend_from_slice(&e.u16(1));
        body.extend_from_slice(&[iface.tsresol, 0, 0, 0]);
        if iface.tsoffset_s != 0 {
            // if_tsoffset (code 14, length 8)
            body.extend_from_slice(&e.u16(14));
            body.extend_from_slice(&e.u16(8));
            body.extend_from_slice(&match e {
                Endian::Little => iface.tsoffset_s.to_le_bytes(),
                Endian::Big => iface.tsoffset_s.to_be_bytes(),
            });
        }
        body.extend_from_slice(&e.u16(0));
        body.extend_from_slice(&e.u16(0));
        self.block(0x0000_0001, &body)?;
        self.interfaces.push(iface);
        Ok(self.interfaces.len() as u32 - 1)
    }

    /// Write a frame with a timestamp in the interface's own units (the caller converts).
    pub fn write_enhanced_raw(&mut self, interface: u32, ts_units: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let e = self.endian;
        let snaplen = self.interfaces[interface as usize].snaplen as usize;
        let data = &data[..data.len().min(if snaplen == 0 { usize::MAX } else { snaplen })];
        let mut body = Vec::with_capacity(20 + data.len() + 4);
        body.extend_from_slice(&e.u32(interface));
        body.extend_from_slice(&e.u32((ts_units >> 32) as u32));
        body.extend_from_slice(&e.u32(ts_units as u32));
        body.extend_from_slice(&e.u32(data.len() as u32));
        body.extend_from_slice(&e.u32(orig_len));
        body.extend_from_slice(data);
        pad4(&mut body);
        self.block(0x0000_0006, &body)
    }

    /// Write a frame timestamped in nanoseconds, converted exactly to the interface's
    /// resolution (rounding down: see `ns_to_units`).
    pub fn write_enhanced(&mut self, interface: u32, ts_ns: i64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let iface = &self.interfaces[interface as usize];
        let rel = ts_ns as i128 - iface.tsoffset_s as i128 * 1_000_000_000;
        let raw = ns_to_units(rel, units_per_second(iface.tsresol));
        self.write_enhanced_raw(interface, raw, data, orig_len)
    }

    /// Simple packet block: no timestamp, no interface id (interface 0 implied).
    pub fn write_simple(&mut self, data: &[u8]) -> io::Result<()> {
        let mut body = Vec::with_capacity(4 + data.len() + 4);
        body.extend_from_slice(&self.endian.u32(data.len() as u32));
        body.extend_from_slice(data);
        pad4(&mut body);
        self.block(0x0000_0003, &body)
    }

    fn block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        let e = self.endian;
        let total = (12 + body.len()) as u32;
        self.out.write_all(&e.u32(block_type))?;
        self.out.write_all(&e.u32(total))?;
        self.out.write_all(body)?;
        self.out.write_all(&e.u32(total))
    }

    /// The underlying writer (flush or finish it yourself).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The raw timestamp, in `units` per second, of a time `rel_ns` after the interface's
/// offset: the last unit that a reader (units → ns, rounding down) reads as no later
/// than `rel_ns`. So a time read from such a capture is written back unchanged, even
/// where a unit is not a whole number of nanoseconds (2^-n s), where rounding down
/// in both directions would lose a unit on every round trip.
pub fn ns_to_units(rel_ns: i128, units: u128) -> u64 {
    // the largest r with floor(r·1e9 / units) <= rel_ns, i.e. r·1e9 < (rel_ns + 1)·units
    ((rel_ns + 1) * units as i128 - 1).div_euclid(1_000_000_000) as u64
}

/// Units per second of a raw `if_tsresol` byte.
pub fn units_per_second(tsresol: u8) -> u128 {
    let exp = (tsresol & 0x7f) as u32;
    if tsresol & 0x80 == 0 {
        10u128.pow(exp)
    } else {
        1u128 << exp
    }
}

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

/// MoonSniff record writer.
pub struct MoonSniffWriter<W: Write> {
    out: W,
}

impl<W: Write> MoonSniffWriter<W> {
    /// A writer of headerless records.
    pub fn new(out: W) -> Self {
        MoonSniffWriter { out }
    }

    /// One record: capture time and 32-bit id.
    pub fn write(&mut self, ts_ns: i64, id: u32) -> io::Result<()> {
        let mut rec = [0u8; 12];
        rec[0..8].copy_from_slice(&(ts_ns as u64).to_le_bytes());
        rec[8..12].copy_from_slice(&id.to_le_bytes());
        self.out.write_all(&rec)
    }

    /// The underlying writer (flush or finish it yourself).
    pub fn into_inner(self) -> W {
        self.out
    }
}
