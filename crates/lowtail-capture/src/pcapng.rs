use std::path::PathBuf;

use pcap_parser::pcapng::{
    parse_block_be, parse_block_le, parse_enhancedpacketblock_be, parse_enhancedpacketblock_le, Block, OptionCode,
    PcapNGOption,
};

use crate::error::CaptureError;
use crate::item::{Frame, Item, NS_PER_SEC};
use crate::link::LinkType;
use crate::window::{u32_at, Window, MAX_RECORD};

const SHB: u32 = 0x0a0d_0d0a;
const EPB: u32 = 0x0000_0006;
const SPB: u32 = 0x0000_0003;
const BOM: u32 = 0x1a2b_3c4d;

/// Converts an interface's raw timestamp units to nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TsScale {
    /// Units are a whole number of nanoseconds (10^-9, 10^-6, 10^-3, 1 s ...).
    Mul(i64),
    /// Any other resolution (10^-12, 2^-n ...): exact conversion through 128-bit math.
    PerSecond(u128),
}

impl TsScale {
    /// `if_tsresol`: bit 7 clear = negative power of 10, set = negative power of 2.
    pub(crate) fn from_tsresol(tsresol: u8) -> Option<TsScale> {
        let exp = (tsresol & 0x7f) as u32;
        let units: u128 = if tsresol & 0x80 == 0 {
            if exp > 30 {
                return None;
            }
            10u128.pow(exp)
        } else {
            if exp > 100 {
                return None;
            }
            1u128.checked_shl(exp)?
        };
        if 1_000_000_000u128.is_multiple_of(units) {
            Some(TsScale::Mul((1_000_000_000u128 / units) as i64))
        } else {
            Some(TsScale::PerSecond(units))
        }
    }

    #[inline]
    pub(crate) fn to_ns(self, raw: u64) -> i64 {
        match self {
            TsScale::Mul(k) => (raw as i64).wrapping_mul(k),
            TsScale::PerSecond(units) => ((raw as u128 * 1_000_000_000u128) / units) as i64,
        }
    }
}

/// `if_tsoffset` in seconds, in the section's byte order. (pcap-parser 0.17's
/// `InterfaceDescriptionBlock::if_tsoffset` always reads it little-endian, so a
/// big-endian section's offset came out byte-swapped.) The last one counts, as for
/// `if_tsresol`.
fn tsoffset_s(options: &[PcapNGOption], big_endian: bool) -> i64 {
    let raw = options.iter().rev().find(|o| o.code == OptionCode::IfTsoffset).and_then(|o| o.value().get(..8));
    match raw.map(|b| <[u8; 8]>::try_from(b).expect("eight bytes")) {
        Some(b) if big_endian => i64::from_be_bytes(b),
        Some(b) => i64::from_le_bytes(b),
        None => 0,
    }
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link: Result<LinkType, i32>,
    scale: TsScale,
    offset_ns: i64,
    snaplen: u32,
}

/// The section versions libpcap reads: 1.0, and 1.2, which some old tools wrote for
/// 1.0. A later section only needs major version 1 (libpcap checks no more there).
fn first_section_is_read(major: u16, minor: u16) -> bool {
    major == 1 && (minor == 0 || minor == 2)
}

/// pcapng: any number of sections (each with its own byte order), interfaces with their
/// own link type, resolution and offset; enhanced and simple packet blocks. Blocks are
/// parsed by `pcap-parser` straight from the window.
///
/// Versions are libpcap's: a first section other than 1.0 or 1.2 is refused, a later
/// section of another major version ends the reading there (an error at its offset).
/// A packet block whose header cannot be right (lengths that contradict each other,
/// more captured bytes than the frame had or the interface's snap length allows) is
/// corruption at its offset, also when the block runs past the end of the input.
pub struct PcapngReader {
    window: Window,
    path: PathBuf,
    big_endian: bool,
    interfaces: Vec<Interface>,
    snaplen: u32,
    sections: u64,
    pending: usize,
    finished: bool,
    cut: bool,
    untimed: u64,
    warnings: Vec<String>,
}

impl PcapngReader {
    pub(crate) fn new(window: Window, path: PathBuf) -> Result<Self, CaptureError> {
        let mut r = PcapngReader {
            window,
            path,
            big_endian: false,
            interfaces: Vec::new(),
            snaplen: 0,
            sections: 0,
            pending: 0,
            finished: false,
            cut: false,
            untimed: 0,
            warnings: Vec::new(),
        };
        let got = r.window.ensure(28).map_err(|e| r.io(e))?;
        if got < 28 {
            return Err(CaptureError::TruncatedHeader { path: r.path, format: "pcapng", got, need: 28 });
        }
        // Read the blocks ahead of the first packet now, so the link types and snap
        // length are known (and unsupported ones fail) before any thread starts.
        r.next_block_header()?;
        Ok(r)
    }

    fn io(&self, source: std::io::Error) -> CaptureError {
        CaptureError::read(&self.path, source)
    }

    /// Corruption at the current block (`next_item` ends the reading on any error).
    fn corrupt(&self, detail: String) -> CaptureError {
        CaptureError::Corrupt { path: self.path.clone(), format: "pcapng", offset: self.window.offset(), detail }
    }

    fn u32_at(&self, b: &[u8], at: usize) -> u32 {
        u32_at(b, at, self.big_endian)
    }

    /// Skip over section and interface blocks (recording what they say) until a packet
    /// block is complete in the window; returns its length, or `None` at the end.
    fn next_block_header(&mut self) -> Result<Option<usize>, CaptureError> {
        loop {
            let have = self.window.ensure(12).map_err(|e| self.io(e))?;
            if have == 0 {
                return Ok(None);
            }
            if have < 12 {
                self.truncated(have, 12);
                return Ok(None);
            }
            let b = self.window.bytes();
            let block_type = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if block_type == SHB {
                self.big_endian = match u32::from_le_bytes([b[8], b[9], b[10], b[11]]) {
                    BOM => false,
                    x if x.swap_bytes() == BOM => true,
                    _ => return Err(self.corrupt("section header has no valid byte-order magic".into())),
                };
            }
            let block_type = if self.big_endian { block_type.swap_bytes() } else { block_type };
            let len = self.u32_at(b, 4) as usize;
            if len < 12 || !len.is_multiple_of(4) || len > MAX_RECORD {
                return Err(self.corrupt(format!("block of type {block_type:#x} claims length {len}")));
            }
            if block_type == EPB {
                self.check_packet_block(len)?;
            }
            let have = self.window.ensure(len).map_err(|e| self.io(e))?;
            if have < len {
                self.truncated(have, len);
                return Ok(None);
            }
            if block_type == EPB {
                return Ok(Some(len));
            }
            self.meta_block(block_type, len)?;
            self.window.advance(len);
        }
    }

    /// The fixed part of an enhanced packet block (`len` bytes long) must agree with
    /// itself, its interface and the block length before the block is read; a block
    /// cut by the end of the input is checked as far as its bytes go. A block without
    /// options ends with its length right after the packet data: when that word holds
    /// exactly the length such a block would have, shorter than `len`, the block's
    /// length field is what is wrong (the blocks after it would be read as its options).
    fn check_packet_block(&mut self, len: usize) -> Result<(), CaptureError> {
        let have = self.window.ensure(28).map_err(|e| self.io(e))?;
        if have < 28 {
            return Ok(()); // cut inside its fixed part: nothing more to check
        }
        let b = self.window.bytes();
        let (if_id, caplen, origlen) = (self.u32_at(b, 8), self.u32_at(b, 20) as usize, self.u32_at(b, 24) as usize);
        let data_end = 28usize.saturating_add(caplen.next_multiple_of(4));
        let why = if len < 32 || data_end + 4 > len {
            format!("packet block of {len} bytes claims {caplen} captured bytes")
        } else if caplen > origlen {
            format!("packet block claims {caplen} captured bytes of a {origlen}-byte frame")
        } else if let Some(i) = self.interfaces.get(if_id as usize).filter(|i| i.snaplen != 0) {
            if caplen <= i.snaplen as usize {
                return self.check_block_end(len, data_end);
            }
            format!(
                "packet block claims {caplen} captured bytes, more than its interface's snap length ({})",
                i.snaplen
            )
        } else if (if_id as usize) < self.interfaces.len() {
            return self.check_block_end(len, data_end);
        } else {
            return Err(CaptureError::UnknownInterface { path: self.path.clone(), interface: if_id });
        };
        Err(self.corrupt(why))
    }

    /// See `check_packet_block`: the word after the packet data of a block claiming `len` bytes.
    fn check_block_end(&mut self, len: usize, data_end: usize) -> Result<(), CaptureError> {
        let end = data_end + 4;
        if end >= len || self.window.ensure(end).map_err(|e| self.io(e))? < end {
            return Ok(());
        }
        let trailer = self.u32_at(self.window.bytes(), data_end) as usize;
        if trailer != end {
            return Ok(());
        }
        Err(self.corrupt(format!("packet block claims {len} bytes, but its own trailer ends it after {end}")))
    }

    /// A section header: libpcap's versions (see `first_section_is_read`).
    fn section(&mut self, major: u16, minor: u16) -> Result<(), CaptureError> {
        self.sections += 1;
        let read = if self.sections == 1 { first_section_is_read(major, minor) } else { major == 1 };
        if read {
            self.interfaces.clear();
            return Ok(());
        }
        Err(CaptureError::UnsupportedVersion {
            path: self.path.clone(),
            format: "pcapng section",
            major,
            minor,
            offset: self.window.offset(),
            supported: if self.sections == 1 { "1.0 and 1.2" } else { "major version 1" },
        })
    }

    fn meta_block(&mut self, block_type: u32, len: usize) -> Result<(), CaptureError> {
        if block_type == SPB {
            self.untimed += 1;
            return Ok(());
        }
        let data = &self.window.bytes()[..len];
        let parsed = if self.big_endian { parse_block_be(data) } else { parse_block_le(data) };
        let iface = match parsed {
            Ok((_, Block::SectionHeader(shb))) => return self.section(shb.major_version, shb.minor_version),
            Ok((_, Block::InterfaceDescription(idb))) => match TsScale::from_tsresol(idb.if_tsresol) {
                Some(scale) => Interface {
                    link: LinkType::from_pcap(idb.linktype.0).ok_or(idb.linktype.0),
                    scale,
                    offset_ns: tsoffset_s(&idb.options, self.big_endian).saturating_mul(NS_PER_SEC),
                    snaplen: idb.snaplen,
                },
                None => {
                    return Err(self.corrupt(format!("interface has an impossible if_tsresol {:#x}", idb.if_tsresol)))
                }
            },
            Ok(_) => return Ok(()),
            Err(e) => return Err(self.corrupt(format!("block of type {block_type:#x} does not parse ({e:?})"))),
        };
        if let Err(linktype) = iface.link {
            return Err(CaptureError::UnsupportedLinkType { path: self.path.clone(), linktype });
        }
        self.snaplen = self.snaplen.max(iface.snaplen);
        self.interfaces.push(iface);
        Ok(())
    }

    fn truncated(&mut self, have: usize, need: usize) {
        self.finished = true;
        self.cut = true;
        self.warnings.push(format!(
            "{}: the last block is truncated ({have} of {need} bytes; capture killed while writing?): dropped it",
            self.path.display()
        ));
    }

    fn finish(&mut self) {
        self.finished = true;
        if self.untimed > 0 {
            self.warnings.push(format!(
                "{}: {} simple packet blocks carry no timestamp: skipped them",
                self.path.display(),
                self.untimed
            ));
            self.untimed = 0;
        }
    }
}

impl PcapngReader {
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        self.window.advance(std::mem::take(&mut self.pending));
        if self.finished {
            return Ok(None);
        }
        let len = match self.next_block_header() {
            Ok(Some(len)) => len,
            Ok(None) => {
                self.finish();
                return Ok(None);
            }
            Err(e) => {
                self.finished = true;
                return Err(e);
            }
        };
        let data = &self.window.bytes()[..len];
        let parsed =
            if self.big_endian { parse_enhancedpacketblock_be(data) } else { parse_enhancedpacketblock_le(data) };
        let epb = match parsed {
            Ok((_, epb)) => epb,
            Err(e) => {
                let err = self.corrupt(format!("packet block does not parse ({e:?})"));
                self.finished = true;
                return Err(err);
            }
        };
        let Some(&iface) = self.interfaces.get(epb.if_id as usize) else {
            let err = CaptureError::UnknownInterface { path: self.path.clone(), interface: epb.if_id };
            self.finished = true;
            return Err(err);
        };
        let link = iface.link.expect("unsupported link types are rejected when declared");
        let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
        let bytes: &[u8] = epb.data;
        let caplen = (epb.caplen as usize).min(bytes.len());
        self.pending = len;
        Ok(Some(Item::Frame(Frame {
            ts_ns: iface.scale.to_ns(raw).wrapping_add(iface.offset_ns),
            link,
            data: &bytes[..caplen],
            orig_len: epb.origlen,
        })))
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The input ended inside a block.
    pub fn is_cut(&self) -> bool {
        self.cut
    }
}
