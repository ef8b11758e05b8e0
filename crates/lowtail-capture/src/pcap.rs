use std::path::PathBuf;

use pcap_parser::pcap::parse_pcap_header;

use crate::error::CaptureError;
use crate::format::Format;
use crate::item::{Frame, Item, NS_PER_SEC};
use crate::link::LinkType;
use crate::window::{u32_at, Window, MAX_RECORD};

/// Classic libpcap files: microsecond or nanosecond magic, either byte order, and the
/// "modified" (Kuznetzov) variant with 24-byte record headers.
///
/// The file header is parsed by `pcap-parser`; record headers are four integers read
/// in place, which keeps the per-packet path free of copies.
pub struct PcapReader {
    window: Window,
    path: PathBuf,
    link: LinkType,
    big_endian: bool,
    record_header: usize,
    frac_to_ns: i64,
    format: Format,
    snaplen: u32,
    pending: usize,
    finished: bool,
    warnings: Vec<String>,
}

impl PcapReader {
    pub(crate) fn new(mut window: Window, path: PathBuf) -> Result<Self, CaptureError> {
        let io = |source| CaptureError::Io { path: path.clone(), source };
        let got = window.ensure(24).map_err(io)?;
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
        window.advance(24);
        let link = LinkType::from_pcap(header.network.0)
            .ok_or(CaptureError::UnsupportedLinkType { path: path.clone(), linktype: header.network.0 })?;
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
            pending: 0,
            finished: false,
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
        (caplen <= MAX_RECORD && b.len() >= hdr + caplen).then_some((hdr, hdr + caplen))
    }

    /// The next record after making the window hold it; `None` at the end of input.
    fn record_after_refill(&mut self) -> Result<Option<(usize, usize)>, CaptureError> {
        let io = |source| CaptureError::Io { path: self.path.clone(), source };
        let hdr = self.record_header;
        let have = self.window.ensure(hdr).map_err(io)?;
        if have < hdr {
            if have > 0 {
                self.truncated(have, hdr);
            }
            self.finished = true;
            return Ok(None);
        }
        let caplen = self.u32_at(self.window.bytes(), 8) as usize;
        if caplen > MAX_RECORD {
            return Err(CaptureError::Corrupt {
                path: self.path.clone(),
                format: "pcap",
                offset: self.window.offset(),
                detail: format!("record claims {caplen} captured bytes (corrupt length field?)"),
            });
        }
        let need = hdr + caplen;
        let have = self.window.ensure(need).map_err(|source| CaptureError::Io { path: self.path.clone(), source })?;
        if have < need {
            self.truncated(have, need);
            return Ok(None);
        }
        Ok(Some((hdr, need)))
    }

    fn truncated(&mut self, have: usize, need: usize) {
        self.finished = true;
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
    pub fn for_each(&mut self, budget: usize, mut visit: impl FnMut(Item<'_>)) -> Result<usize, CaptureError> {
        self.window.advance(std::mem::take(&mut self.pending));
        let hdr = self.record_header;
        let mut n = 0;
        while n < budget && !self.finished {
            let b = self.window.bytes();
            let mut off = 0;
            while n < budget && off + hdr <= b.len() {
                let caplen = self.u32_at(b, off + 8) as usize;
                let end = off + hdr + caplen;
                if caplen > MAX_RECORD || end > b.len() {
                    break;
                }
                visit(Item::Frame(Frame {
                    ts_ns: self.u32_at(b, off) as i64 * NS_PER_SEC + self.u32_at(b, off + 4) as i64 * self.frac_to_ns,
                    link: self.link,
                    data: &b[off + hdr..end],
                    orig_len: self.u32_at(b, off + 12),
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
}
