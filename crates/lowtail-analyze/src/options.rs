//! How to find packet ids and what to compute: each option's name, default and check
//! live here. The Python module exposes this type as `lowtail._native.AnalyzeOptions`
//! with the same names, the command line takes its defaults from it, and the database
//! stores it as it serialises.

use std::path::PathBuf;

use lowtail_frame::{Endian, FlowKey, IdFormat, IdSpec};
use serde::{Serialize, Serializer};

use crate::error::OptionsError;

/// The most worst events an analysis keeps: a million events are 24 MB in memory and
/// more rows than any plot or table shows (the default is 5000).
pub const MAX_WORST: usize = 1_000_000;
/// The most histogram bins an analysis draws (the default is 100).
pub const MAX_HISTOGRAM_BINS: usize = 10_000;

/// The options of one analysis.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalyzeOptions {
    /// The preset the id fields start from.
    #[serde(serialize_with = "id_format_name")]
    pub id_format: IdFormat,
    /// Bytes from the start of the UDP payload to the id.
    pub id_offset: usize,
    /// Id width in bytes, 4 or 8; 4-byte ids are unwrapped.
    pub id_width: usize,
    /// The id's byte order.
    #[serde(serialize_with = "endian_name")]
    pub id_endian: Endian,
    /// Only UDP datagrams to this port carry ids.
    pub udp_port: Option<u16>,
    /// Treat files without pcap magic as MoonSniff records.
    pub moonsniff_records: bool,
    /// Warm-up to cut, from the first PRE packet.
    pub trim_ns: i64,
    /// Latencies above this count as losses; bounds memory to rate × this.
    pub max_latency_ns: i64,
    /// The most memory the matcher may hold, in bytes (None: three quarters of what the
    /// host, or the memory cgroup, has: `MemoryLimit::for_analysis`). Past it the analysis
    /// stops with `AnalyzeError::OutOfMemory`; a finished analysis is the same whatever
    /// its value, so it is not stored with the options.
    #[serde(skip)]
    pub max_memory_bytes: Option<u64>,
    /// How many worst events to keep.
    pub worst: usize,
    /// Bins of the latency and jitter histograms.
    pub histogram_bins: usize,
    /// Write the matched series to this Parquet file.
    pub export: Option<PathBuf>,
    /// What tells the flows apart in PRE's headers ("none": all packets are one flow).
    #[serde(serialize_with = "flow_key_name")]
    pub flow_key: FlowKey,
}

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions::for_id_format(IdFormat::default())
    }
}

impl AnalyzeOptions {
    /// The defaults, with the id fields of `format`'s preset.
    pub fn for_id_format(format: IdFormat) -> Self {
        let id = format.spec();
        AnalyzeOptions {
            id_format: format,
            id_offset: id.offset,
            id_width: id.width,
            id_endian: id.endian,
            udp_port: id.udp_dst_port,
            moonsniff_records: false,
            trim_ns: 1_000_000_000,
            max_latency_ns: 10_000_000_000,
            max_memory_bytes: None,
            worst: 5000,
            histogram_bins: 100,
            export: None,
            flow_key: FlowKey::default(),
        }
    }

    /// The one check of values the types allow but the analysis cannot use, and of
    /// sizes that would allocate without bound.
    pub fn check(&self) -> Result<(), OptionsError> {
        if self.id_width != 4 && self.id_width != 8 {
            return Err(OptionsError::IdWidth(self.id_width as i64));
        }
        if self.max_latency_ns <= 0 {
            return Err(OptionsError::MaxLatency(self.max_latency_ns));
        }
        // A warm-up before the first packet means nothing: the CLI's durations cannot be
        // negative, and the library's callers get the same refusal.
        if self.trim_ns < 0 {
            return Err(OptionsError::Negative { option: "trim", value: self.trim_ns });
        }
        for (option, value, max) in
            [("worst", self.worst, MAX_WORST), ("histogram_bins", self.histogram_bins, MAX_HISTOGRAM_BINS)]
        {
            if value > max {
                let value = i64::try_from(value).unwrap_or(i64::MAX);
                return Err(OptionsError::TooLarge { option, value, max: max as u64 });
            }
        }
        Ok(())
    }

    /// Where the id lives in a frame.
    pub fn id_spec(&self) -> IdSpec {
        IdSpec { offset: self.id_offset, width: self.id_width, endian: self.id_endian, udp_dst_port: self.udp_port }
    }
}

fn id_format_name<S: Serializer>(format: &IdFormat, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(format.name())
}

fn flow_key_name<S: Serializer>(key: &FlowKey, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(key.name())
}

fn endian_name<S: Serializer>(endian: &Endian, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(endian.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_set_the_id_fields() {
        let ms = AnalyzeOptions::for_id_format(IdFormat::MoonSniff);
        assert_eq!(ms.id_spec(), IdSpec::moonsniff());
        assert_eq!(AnalyzeOptions::default().id_spec(), IdSpec::default());
    }

    #[test]
    fn only_4_and_8_byte_ids() {
        let bad = AnalyzeOptions { id_width: 3, ..AnalyzeOptions::default() };
        assert_eq!(bad.check(), Err(OptionsError::IdWidth(3)));
        assert_eq!(bad.check().unwrap_err().to_string(), "--id-width must be 4 or 8, not 3");
        assert!(AnalyzeOptions::for_id_format(IdFormat::MoonSniff).check().is_ok());
    }

    #[test]
    fn a_horizon_of_zero_is_refused() {
        for ns in [0, -1, i64::MIN] {
            let none = AnalyzeOptions { max_latency_ns: ns, ..AnalyzeOptions::default() };
            assert_eq!(none.check(), Err(OptionsError::MaxLatency(ns)));
        }
        assert!(AnalyzeOptions { max_latency_ns: 1, ..AnalyzeOptions::default() }.check().is_ok());
    }

    #[test]
    fn a_negative_warm_up_is_refused() {
        let early = AnalyzeOptions { trim_ns: -1, ..AnalyzeOptions::default() };
        assert_eq!(early.check(), Err(OptionsError::Negative { option: "trim", value: -1 }));
        assert!(AnalyzeOptions { trim_ns: 0, ..AnalyzeOptions::default() }.check().is_ok());
    }

    #[test]
    fn sizes_that_would_allocate_without_bound_are_refused() {
        let absurd = AnalyzeOptions { worst: 1_000_000_000_000, ..AnalyzeOptions::default() };
        assert_eq!(absurd.check().unwrap_err().to_string(), "--worst must be at most 1000000, not 1000000000000");
        let bins = AnalyzeOptions { histogram_bins: MAX_HISTOGRAM_BINS + 1, ..AnalyzeOptions::default() };
        assert!(bins.check().unwrap_err().to_string().starts_with("--histogram-bins must be at most"));
        let most = AnalyzeOptions { worst: MAX_WORST, histogram_bins: MAX_HISTOGRAM_BINS, ..AnalyzeOptions::default() };
        assert!(most.check().is_ok());
    }

    #[test]
    fn serialises_under_the_option_names() {
        let v = serde_json::to_value(AnalyzeOptions::default()).unwrap();
        assert_eq!(v["id_format"], "lowtail");
        assert_eq!(v["id_endian"], "big");
        assert_eq!(v["max_latency_ns"], 10_000_000_000i64);
        assert_eq!(v["worst"], 5000);
        assert_eq!(v["flow_key"], "5tuple");
        assert!(v["export"].is_null() && v["udp_port"].is_null());
    }
}
