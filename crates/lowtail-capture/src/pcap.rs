use std::path::PathBuf;

use pcap_parser::pcap::parse_pcap_header;

use crate::error::CaptureError;
use crate::format::Format;
use crate::item::{Frame, Item, NS_PER_SEC};
use crate::link::LinkType;
use crate::window::{u32_at, Window, MAX_RECORD};

/// The link type is the low 16 bits of the header's link-type field; the upper bits
/// hold the FCS length and its flag (and reserved bits), which say how many bytes of
/// frame check sequence end each frame. They do not matter here: the id is found from
/// the IP and UDP headers' own lengths, so bytes after the datagram are never read.
const LINKTYPE_MASK: i32 = 0xFFFF;

/// Classic libpcap files: microsecond or nanosecond magic, either byte order, and the
/// "modified" (Kuznetzov) variant with 24-byte record headers.
///
/// The file header is parsed by `pcap-parser`; record headers are four integers read
/// in place, which keeps the per-packet path free of copies. Every record header is
/// checked before its data is trusted: one that claims more captured bytes than the
/// snap length, or than the frame had on the wire, cannot be right, and is corruption
/// at its offset, wherever it is (also when it runs past the end of the file: only a
/// plausible record cut by the end of the input is a capture cut short).
pub struct PcapReader {
    window: Window,
    path: PathBuf,
    link: LinkType,
    big_endian: bool,
    record_header: usize,
    frac_to_ns: i64,
    format: Format,
    snaplen: u32,
    /// The most captured bytes a record may claim: the snap length (or `MAX_RECORD`
    /// when the file announces none).
    max_caplen: usize,
    pending: usize,
    finished: bool,
    cut: bool,
    warnings: Vec<String>,
}

/// Whether libpcap reads a file of this version: 2.x, and 543.0 (DG/UX's tcpdump wrote
/// 2.4 files under that number). Version 1 files ("archaic", libpcap says) have other
/// record headers.
fn version_is_read(major: u16, minor: u16) -> bool {
    major == 2 || (major, minor) == (543, 0)
}

impl PcapReader {
    pub(crate) fn new(mut window: Window, path: PathBuf) -> Result<Self, CaptureError> {
        let got = window.ensure(24).map_err(|e| CaptureError::read(&path, e))?;
        if got < 24 {
            return Err(CaptureError::TruncatedHeader { path, format: "pcap", got, need: 24 });
        }
        let header = match parse_pcap_header(&window.bytes()[..24]) {
            Ok((_, h)) => h,
            Err(e) => {
                return Err(CaptureError::Corrupt {
                    path,
                    format: "pcap",
                    offset: 0,
                    detail: format!("file header does not parse ({e:?})"),
                })
            }
        };
        if !version_is_read(header.version_major, header.version_minor) {
            return Err(CaptureError::UnsupportedVersion {
                path,
                format: "pcap",
                major: header.version_major,
                minor: header.version_minor,
                offset: 0,
                supported: "2.x",
            });
        }
        window.advance(24);
        let linktype = header.network.0 & LINKTYPE_MASK;
        let link =
            LinkType::from_pcap(linktype).ok_or(CaptureError::UnsupportedLinkType { path: path.clone(), linktype })?;
        let nanos = header.is_nanosecond_precision();
        Ok(PcapReader {
            window,
            path,
            link,
            big_endian: header.is_bigendian(),
            record_header: if header.is_modified_format() { 24 } else { 16 },
            frac_to_ns: if nanos { 1 } else { 1_000 },
            format: if nanos { Format::PcapNano } else { Format::PcapMicro },
            snaplen: header.snaplen,
            max_caplen: if header.snaplen == 0 { MAX_RECORD } else { (header.snaplen as usize).min(MAX_RECORD) },
            pending: 0,
            finished: false,
            cut: false,
            warnings: Vec::new(),
        })
    }

    #[inline(always)]
    fn u32_at(&self, b: &[u8], at: usize) -> u32 {
        u32_at(b, at, self.big_endian)
    }

    /// The next record when it is already wholly in the window (the common case).
    #[inline(always)]
    fn record_in_window(&self) -> Option<(usize, usize)> {
        let b = self.window.bytes();
        let hdr = self.record_header;
        if b.len() < hdr {
            return None;
        }
        let caplen = self.u32_at(b, 8) as usize;
        let plausible = caplen <= self.max_caplen && caplen <= self.u32_at(b, 12) as usize;
        (plausible && b.len() >= hdr + caplen).then_some((hdr, hdr + caplen))
    }

    /// The next record after making the window hold it; `None` at the end of input. An
    /// error ends the reading.
    fn record_after_refill(&mut self) -> Result<Option<(usize, usize)>, CaptureError> {
        let next = self.refill_record();
        self.finished |= next.is_err();
        next
    }

    fn refill_record(&mut self) -> Result<Option<(usize, usize)>, CaptureError> {
        let hdr = self.record_header;
        let have = self.window.ensure(hdr).map_err(|e| CaptureError::read(&self.path, e))?;
        if have < hdr {
            if have > 0 {
                self.truncated(have, hdr);
            }
            self.finished = true;
            return Ok(None);
        }
        let b = self.window.bytes();
        let (caplen, orig_len) = (self.u32_at(b, 8) as usize, self.u32_at(b, 12) as usize);
        self.check_record(caplen, orig_len)?;
        let need = hdr + caplen;
        let have = self.window.ensure(need).map_err(|e| CaptureError::read(&self.path, e))?;
        if have < need {
            self.truncated(have, need);
            return Ok(None);
        }
        Ok(Some((hdr, need)))
    }

    /// A record header that cannot be right is corruption at its offset.
    fn check_record(&self, caplen: usize, orig_len: usize) -> Result<(), CaptureError> {
        let why = if caplen > self.max_caplen && caplen > self.snaplen as usize && self.snaplen != 0 {
            format!("record claims {caplen} captured bytes, more than the snap length ({})", self.snaplen)
        } else if caplen > self.max_caplen {
            format!("record claims {caplen} captured bytes (corrupt length field?)")
        } else if caplen > orig_len {
            format!("record claims {caplen} captured bytes of a {orig_len}-byte frame")
        } else {
            return Ok(());
        };
        // Not corruption when another process cut the file short under the reader.
        self.window.check().map_err(|e| CaptureError::read(&self.path, e))?;
        Err(CaptureError::Corrupt {
            path: self.path.clone(),
            format: "pcap",
            offset: self.window.offset(),
            detail: why,
        })
    }

    fn truncated(&mut self, have: usize, need: usize) {
        self.finished = true;
        self.cut = true;
        self.warnings.push(format!(
            "{}: the last record is truncated ({have} of {need} bytes; capture killed while writing?): dropped it",
            self.path.display()
        ));
    }
}

impl PcapReader {
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        self.window.advance(std::mem::take(&mut self.pending));
        if self.finished {
            return Ok(None);
        }
        let (hdr, need) = match self.record_in_window() {
            Some(r) => r,
            None => match self.record_after_refill()? {
                Some(r) => r,
                None => return Ok(None),
            },
        };
        let b = self.window.bytes();
        let secs = self.u32_at(b, 0) as i64;
        let frac = self.u32_at(b, 4) as i64;
        let orig_len = self.u32_at(b, 12);
        self.pending = need;
        Ok(Some(Item::Frame(Frame {
            ts_ns: secs * NS_PER_SEC + frac * self.frac_to_ns,
            link: self.link,
            data: &b[hdr..need],
            orig_len,
        })))
    }

    /// Visit up to `budget` records, walking the window's bytes directly and touching
    /// the window only when it runs dry.
    #[inline]
    pub fn for_each(&mut self, budget: usize, visit: impl FnMut(Item<'_>)) -> Result<usize, CaptureError> {
        // One loop per byte order: the order is then a constant inside it, not a branch
        // at every field of every record.
        if self.big_endian {
            self.walk::<true>(budget, visit)
        } else {
            self.walk::<false>(budget, visit)
        }
    }

    #[inline(always)]
    fn walk<const BIG_ENDIAN: bool>(
        &mut self,
        budget: usize,
        mut visit: impl FnMut(Item<'_>),
    ) -> Result<usize, CaptureError> {
        self.window.advance(std::mem::take(&mut self.pending));
        let (hdr, max_caplen, frac_to_ns, link) = (self.record_header, self.max_caplen, self.frac_to_ns, self.link);
        let field = |h: &[u8; 16], at: usize| u32_at(h, at, BIG_ENDIAN);
        let mut n = 0;
        while n < budget && !self.finished {
            let b = self.window.bytes();
            let mut off = 0;
            while n < budget {
                // The four fields every record header starts with (the modified format's
                // 24-byte headers add theirs after them).
                let Some(h) = b.get(off..off + hdr).and_then(|h| h.first_chunk::<16>()) else { break };
                let (caplen, orig_len) = (field(h, 8) as usize, field(h, 12));
                let start = off + hdr;
                let end = start + caplen;
                if caplen > max_caplen || caplen > orig_len as usize || end > b.len() {
                    break;
                }
                visit(Item::Frame(Frame {
                    ts_ns: field(h, 0) as i64 * NS_PER_SEC + field(h, 4) as i64 * frac_to_ns,
                    link,
                    data: &b[start..end],
                    orig_len,
                }));
                off = end;
                n += 1;
            }
            self.window.advance(off);
            if n < budget && self.record_after_refill()?.is_none() {
                break;
            }
        }
        Ok(n)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The input ended inside a record.
    pub fn is_cut(&self) -> bool {
        self.cut
    }
}
