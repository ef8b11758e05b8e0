//! Writing one synthetic capture in any format and compression lowtail reads.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use lowtail_capture::write::{
    ns_to_units, units_per_second, Endian, MoonSniffWriter, NgInterface, PcapNgWriter, PcapWriter,
};
use lowtail_capture::LinkType;

use crate::error::SynthError;

/// Where the bytes go: plain, zstd or gzip.
pub(crate) enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Zstd(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
        }
    }
}

impl Sink {
    pub(crate) fn create(path: &Path, compression: &str) -> io::Result<Sink> {
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        Ok(match compression {
            "zstd" => Sink::Zstd(zstd::stream::write::Encoder::new(file, 1)?),
            "gzip" => Sink::Gzip(flate2::write::GzEncoder::new(file, flate2::Compression::fast())),
            _ => Sink::Plain(file),
        })
    }

    pub(crate) fn finish(self) -> io::Result<()> {
        let mut inner = match self {
            Sink::Plain(w) => w,
            Sink::Zstd(w) => w.finish()?,
            Sink::Gzip(w) => w.finish()?,
        };
        inner.flush()?;
        inner.into_inner().map_err(|e| e.into_error())?.sync_all()
    }
}

/// The timestamp a reader will get back for `ts_ns` in this format (formats coarser
/// than a nanosecond round down).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Resolution {
    Nanos,
    Micros,
    NgUnits(u8),
}

impl Resolution {
    pub(crate) fn as_read(self, ts_ns: i64) -> i64 {
        match self {
            Resolution::Nanos => ts_ns,
            Resolution::Micros => ts_ns.div_euclid(1000) * 1000,
            Resolution::NgUnits(r) => {
                let units = units_per_second(r);
                let raw = ns_to_units(ts_ns as i128, units);
                ((raw as u128 * 1_000_000_000u128) / units) as i64
            }
        }
    }
}

/// A capture file being written in one of the formats lowtail reads.
pub(crate) enum CaptureOut {
    Pcap(PcapWriter<Sink>, Resolution),
    Ng(PcapNgWriter<Sink>, Vec<Resolution>),
    Moon(MoonSniffWriter<Sink>),
}

impl CaptureOut {
    pub(crate) fn create(
        path: &Path,
        format: &str,
        compression: &str,
        snaplen: u32,
        tsresols: &[u8],
    ) -> Result<CaptureOut, SynthError> {
        let io = |source: io::Error| SynthError::File { path: path.to_path_buf(), source };
        let sink = Sink::create(path, compression).map_err(io)?;
        let snap = if snaplen == 0 { 262_144 } else { snaplen };
        Ok(match format {
            "pcap-ns" | "pcap-us" | "pcap-ns-be" | "pcap-us-be" => {
                let nanos = format.starts_with("pcap-ns");
                let endian = if format.ends_with("-be") { Endian::Big } else { Endian::Little };
                let w = PcapWriter::new(sink, LinkType::Ethernet, nanos, endian, snap).map_err(io)?;
                CaptureOut::Pcap(w, if nanos { Resolution::Nanos } else { Resolution::Micros })
            }
            "pcapng" | "pcapng-be" => {
                let endian = if format.ends_with("-be") { Endian::Big } else { Endian::Little };
                let mut w = PcapNgWriter::new(sink, endian).map_err(io)?;
                let mut res = Vec::new();
                for &t in tsresols {
                    w.add_interface(NgInterface { link: LinkType::Ethernet, snaplen: snap, tsresol: t, tsoffset_s: 0 })
                        .map_err(io)?;
                    res.push(Resolution::NgUnits(t));
                }
                CaptureOut::Ng(w, res)
            }
            "moonsniff" => CaptureOut::Moon(MoonSniffWriter::new(sink)),
            other => return Err(SynthError::UnknownFormat(other.to_string())),
        })
    }

    pub(crate) fn is_moonsniff(&self) -> bool {
        matches!(self, CaptureOut::Moon(_))
    }

    /// Interfaces to spread frames over (pcapng), else 1.
    pub(crate) fn interfaces(&self) -> usize {
        match self {
            CaptureOut::Ng(_, r) => r.len(),
            _ => 1,
        }
    }

    pub(crate) fn resolution(&self, interface: usize) -> Resolution {
        match self {
            CaptureOut::Pcap(_, r) => *r,
            CaptureOut::Ng(_, r) => r[interface],
            CaptureOut::Moon(_) => Resolution::Nanos,
        }
    }

    pub(crate) fn frame(&mut self, interface: usize, ts_ns: i64, data: &[u8]) -> io::Result<()> {
        match self {
            CaptureOut::Pcap(w, _) => w.write(ts_ns, data, data.len() as u32),
            CaptureOut::Ng(w, _) => w.write_enhanced(interface as u32, ts_ns, data, data.len() as u32),
            CaptureOut::Moon(_) => Ok(()),
        }
    }

    pub(crate) fn record(&mut self, ts_ns: i64, id: u32) -> io::Result<()> {
        match self {
            CaptureOut::Moon(w) => w.write(ts_ns, id),
            _ => Ok(()),
        }
    }

    pub(crate) fn finish(self) -> io::Result<()> {
        match self {
            CaptureOut::Pcap(w, _) => w.into_inner().finish(),
            CaptureOut::Ng(w, _) => w.into_inner().finish(),
            CaptureOut::Moon(w) => w.into_inner().finish(),
        }
    }
}
