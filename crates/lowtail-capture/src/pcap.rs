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
/// in place (`Records::header_at`, the one place that reads them), which keeps the
/// per-packet path free of copies. Every record header is checked before its data is
/// trusted: one that claims more captured bytes than the snap length, or than the frame
/// had on the wire, cannot be right, and is corruption at its offset, wherever it is
/// (also when it runs past the end of the file: only a plausible record cut by the end
/// of the input is a capture cut short).
pub struct PcapReader {
    window: Window,
    path: PathBuf,
    records: Records,
    big_endian: bool,
    format: Format,
    snaplen: u32,
    pending: usize,
    finished: bool,
    cut: bool,
    warnings: Vec<String>,
}

/// What every record of one file shares: how long its header is, what it may claim,
/// what its timestamps count and what its frames are.
#[derive(Debug, Clone, Copy)]
struct Records {
    header_len: usize,
    /// The most captured bytes a record may claim: the snap length (or `MAX_RECORD`
    /// when the file announces none).
    max_caplen: usize,
    frac_to_ns: i64,
    link: LinkType,
}

/// The four fields every record header starts with (the modified format's 24-byte
/// headers add theirs after them).
#[derive(Debug, Clone, Copy)]
struct RecordHeader {
    secs: u32,
    frac: u32,
    caplen: u32,
    orig_len: u32,
}

/// A record wholly in the window: its header, and where its frame's bytes are.
#[derive(Debug, Clone, Copy)]
struct Record {
    header: RecordHeader,
    start: usize,
    end: usize,
}

impl Records {
    /// The header of the record at `at` in `b`, when `b` holds all of it.
    #[inline(always)]
    fn header_at<const BIG_ENDIAN: bool>(&self, b: &[u8], at: usize) -> Option<RecordHeader> {
        let h = b.get(at..at + self.header_len)?.first_chunk::<16>()?;
        let field = |i: usize| u32_at(h, i, BIG_ENDIAN);
        Some(RecordHeader { secs: field(0), frac: field(4), caplen: field(8), orig_len: field(12) })
    }

    /// Whether a header can be right: no more captured bytes than the snap length, nor
    /// than the frame had on the wire.
    #[inline(always)]
    fn plausible(&self, h: &RecordHeader) -> bool {
        h.caplen as usize <= self.max_caplen && h.caplen <= h.orig_len
    }

    /// The record at `at` in `b` when its header is plausible and `b` holds all of it:
    /// the per-packet path. `None` sends the caller to the window (more bytes, the end of
    /// the input, or a corrupt header to report).
    #[inline(always)]
    fn record_at<const BIG_ENDIAN: bool>(&self, b: &[u8], at: usize) -> Option<Record> {
        let header = self.header_at::<BIG_ENDIAN>(b, at)?;
        let start = at + self.header_len;
        let end = start + header.caplen as usize;
        (self.plausible(&header) && end <= b.len()).then_some(Record { header, start, end })
    }

    /// The frame of a record found in `b`.
    #[inline(always)]
    fn frame<'a>(&self, b: &'a [u8], r: &Record) -> Frame<'a> {
        r.frame(b, self.frac_to_ns, self.link)
    }
}

impl Record {
    /// Its frame, from the bytes it was found in.
    #[inline(always)]
    fn frame<'a>(&self, b: &'a [u8], frac_to_ns: i64, link: LinkType) -> Frame<'a> {
        Frame {
            ts_ns: self.header.secs as i64 * NS_PER_SEC + self.header.frac as i64 * frac_to_ns,
            link,
            data: &b[self.start..self.end],
            orig_len: self.header.orig_len,
        }
    }
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
        let records = Records {
            header_len: if header.is_modified_format() { 24 } else { 16 },
            max_caplen: if header.snaplen == 0 { MAX_RECORD } else { (header.snaplen as usize).min(MAX_RECORD) },
            frac_to_ns: if nanos { 1 } else { 1_000 },
            link,
        };
        Ok(PcapReader {
            window,
            path,
            records,
            big_endian: header.is_bigendian(),
            format: if nanos { Format::PcapNano } else { Format::PcapMicro },
            snaplen: header.snaplen,
            pending: 0,
            finished: false,
            cut: false,
            warnings: Vec::new(),
        })
    }

    /// The next record after making the window hold it; `None` at the end of input. An
    /// error ends the reading.
    fn record_after_refill<const BIG_ENDIAN: bool>(&mut self) -> Result<Option<Record>, CaptureError> {
        let next = self.refill_record::<BIG_ENDIAN>();
        self.finished |= next.is_err();
        next
    }

    fn refill_record<const BIG_ENDIAN: bool>(&mut self) -> Result<Option<Record>, CaptureError> {
        let hdr = self.records.header_len;
        let have = self.window.ensure(hdr).map_err(|e| CaptureError::read(&self.path, e))?;
        let Some(header) = self.records.header_at::<BIG_ENDIAN>(self.window.bytes(), 0) else {
            if have > 0 {
                self.truncated(have, hdr);
            }
            self.finished = true;
            return Ok(None);
        };
        self.check_record(&header)?;
        let need = hdr + header.caplen as usize;
        let have = self.window.ensure(need).map_err(|e| CaptureError::read(&self.path, e))?;
        if have < need {
            self.truncated(have, need);
            return Ok(None);
        }
        Ok(Some(Record { header, start: hdr, end: need }))
    }

    /// A record header that cannot be right is corruption at its offset.
    fn check_record(&self, h: &RecordHeader) -> Result<(), CaptureError> {
        if self.records.plausible(h) {
            return Ok(());
        }
        let (caplen, max_caplen) = (h.caplen as usize, self.records.max_caplen);
        let why = if caplen > max_caplen && caplen > self.snaplen as usize && self.snaplen != 0 {
            format!("record claims {caplen} captured bytes, more than the snap length ({})", self.snaplen)
        } else if caplen > max_caplen {
            format!("record claims {caplen} captured bytes (corrupt length field?)")
        } else {
            format!("record claims {caplen} captured bytes of a {}-byte frame", h.orig_len)
        };
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
        if self.big_endian {
            self.next::<true>()
        } else {
            self.next::<false>()
        }
    }

    #[inline(always)]
    fn next<const BIG_ENDIAN: bool>(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        self.window.advance(std::mem::take(&mut self.pending));
        if self.finished {
            return Ok(None);
        }
        let record = match self.records.record_at::<BIG_ENDIAN>(self.window.bytes(), 0) {
            Some(r) => r,
            None => match self.record_after_refill::<BIG_ENDIAN>()? {
                Some(r) => r,
                None => return Ok(None),
            },
        };
        self.pending = record.end;
        Ok(Some(Item::Frame(self.records.frame(self.window.bytes(), &record))))
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
        let records = self.records;
        // The link type read from `self`, not from the copy: taken from the copy, the
        // compiler forgot that it is a valid `LinkType` and tested every item for being a
        // MoonSniff record (the niche of `Item` is in it), one instruction more per frame.
        let (frac_to_ns, link) = (self.records.frac_to_ns, self.records.link);
        let mut n = 0;
        while n < budget && !self.finished {
            let b = self.window.bytes();
            let mut off = 0;
            while n < budget {
                let Some(record) = records.record_at::<BIG_ENDIAN>(b, off) else { break };
                visit(Item::Frame(record.frame(b, frac_to_ns, link)));
                off = record.end;
                n += 1;
            }
            self.window.advance(off);
            if n < budget && self.record_after_refill::<BIG_ENDIAN>()?.is_none() {
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
