//! The model device and the walk over its packets that writes both captures.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::OpenOptions;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, UInt32Array, UInt64Array, UInt8Array};
use arrow_schema::{DataType, Field, Schema};
use lowtail_frame::{Endian, FlowSchedule, FrameTemplate, IdSpec, TemplateSpec, Vlan};
use parquet::arrow::ArrowWriter;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::SynthError;
use crate::out::CaptureOut;

/// Everything that shapes a synthetic pair. Unknown keys are an error.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthSpec {
    /// Packets PRE sends.
    pub packets: u64,
    /// Send rate, packets per second.
    pub rate_pps: f64,
    /// Packets sent back to back (`burst_gap_ns` apart) per burst.
    pub burst: u32,
    /// Gap between the packets of one burst.
    pub burst_gap_ns: i64,
    /// Timestamp of the first packet.
    pub start_ns: i64,
    /// Seed of every random choice: the same spec writes the same files.
    pub seed: u64,
    /// pcap-ns, pcap-us, pcap-ns-be, pcap-us-be, pcapng, pcapng-be, moonsniff
    pub format: String,
    /// pcapng: one interface per entry, raw if_tsresol bytes; frames alternate between them.
    pub tsresol: Vec<u8>,
    /// none, zstd, gzip
    pub compression: String,
    /// Frame size on the wire, FCS included.
    pub frame_size: usize,
    /// 0 untagged, 1 = 802.1Q, 2 = QinQ
    pub vlan: u8,
    /// IPv6 instead of IPv4.
    pub ipv6: bool,
    /// Bytes from the start of the UDP payload to the id.
    pub id_offset: usize,
    /// Id width in bytes, 4 or 8.
    pub id_width: usize,
    /// The id's byte order: big-endian when true.
    pub id_big_endian: bool,
    /// Id of the first packet; later ones count up (and wrap).
    pub first_id: u64,
    /// UDP destination port of the test traffic.
    pub udp_dst_port: u16,
    /// Flows (UDP source ports 49152, 49153, …), packets assigned round-robin.
    pub flows: u16,
    /// Each flow's weight, one per flow (none: round robin): flow f has `flow_weights[f]`
    /// of every Σ weights packets, as `lowtail-gen --flow-weights` sends them.
    pub flow_weights: Vec<u32>,
    /// Latency added to every packet of flow f: `flow_offsets_ns[f % len]` (none when
    /// empty). Flows with known, different latencies: per-flow figures to check.
    pub flow_offsets_ns: Vec<i64>,
    /// Latency every packet has at least.
    pub base_latency_ns: i64,
    /// Mean of the exponential jitter added to every packet.
    pub jitter_ns: f64,
    /// Periodic interrupts: a packet arriving while one runs waits for its end.
    pub irq_period_ns: i64,
    /// Durations of successive interrupts, cycled (e.g. [5500, 8200]).
    pub irq_durations_ns: Vec<i64>,
    /// Probability that a packet gets a latency spike.
    pub spike_probability: f64,
    /// Length of a spike.
    pub spike_ns: i64,
    /// Probability that a loss event starts at a packet.
    pub loss: f64,
    /// Each loss event drops this many consecutive packets.
    pub loss_burst: u32,
    /// Probability that a received packet arrives twice.
    pub duplicate: f64,
    /// Departures keep arrival order (a queue): a delayed packet delays those behind it.
    /// Packets picked by `reorder` are exempt, so they can be overtaken.
    pub fifo: bool,
    /// Probability that a packet is held back long enough to be overtaken.
    pub reorder: f64,
    /// Extra delay of a packet picked by `reorder`.
    pub reorder_delay_ns: i64,
    /// Probability of a foreign frame (ARP on PRE, TCP on POST) after each packet.
    pub foreign: f64,
    /// Added to every POST timestamp (a negative value makes negative latencies).
    pub post_clock_offset_ns: i64,
    /// Snap length written in the files (0: 262144).
    pub snaplen: u32,
    /// Cut this many bytes off the end of the POST file (uncompressed formats only).
    pub truncate_post_bytes: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            // 3 s at 100 kpps: after the 1 s that `lowtail analyze` trims by default,
            // 200,000 packets remain, enough for its 99.999th percentile.
            packets: 300_000,
            rate_pps: 100_000.0,
            burst: 1,
            burst_gap_ns: 68,
            start_ns: 1_700_000_000_000_000_000,
            seed: 1,
            format: "pcap-ns".into(),
            tsresol: vec![9],
            compression: "none".into(),
            frame_size: 64,
            vlan: 0,
            ipv6: false,
            id_offset: 0,
            id_width: 8,
            id_big_endian: true,
            first_id: 0,
            udp_dst_port: 53,
            flows: 1,
            flow_weights: vec![],
            flow_offsets_ns: vec![],
            base_latency_ns: 3_300,
            jitter_ns: 200.0,
            irq_period_ns: 0,
            irq_durations_ns: vec![],
            spike_probability: 0.0,
            spike_ns: 0,
            loss: 0.0,
            loss_burst: 1,
            duplicate: 0.0,
            fifo: true,
            reorder: 0.0,
            reorder_delay_ns: 50_000,
            foreign: 0.0,
            post_clock_offset_ns: 0,
            snaplen: 0,
            truncate_post_bytes: 0,
        }
    }
}

/// What was written, for tests and `lowtail synth --json`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct SynthSummary {
    /// Packets in PRE (as `SynthSpec::packets`).
    pub packets: u64,
    /// Packets that never reached POST.
    pub lost: u64,
    /// Packets that reached POST twice.
    pub duplicates: u64,
    /// Foreign frames written into PRE.
    pub foreign_pre: u64,
    /// Foreign frames written into POST.
    pub foreign_post: u64,
    /// Size of the PRE file.
    pub pre_bytes: u64,
    /// Size of the POST file.
    pub post_bytes: u64,
    /// Id of the POST packet whose record `truncate_post_bytes` damaged.
    pub truncated_id: Option<u64>,
}

/// A POST departure waiting for its turn in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Departure {
    ts: i64,
    seq: u64,
    copy: u8,
}

/// The formats and compressions `generate` writes.
const FORMATS: [&str; 7] = ["pcap-ns", "pcap-us", "pcap-ns-be", "pcap-us-be", "pcapng", "pcapng-be", "moonsniff"];
const COMPRESSIONS: [&str; 3] = ["none", "zstd", "gzip"];

fn validate(spec: &SynthSpec) -> Result<(), SynthError> {
    let bad = |m: &str| Err(SynthError::InvalidSpec(m.to_string()));
    if !FORMATS.contains(&spec.format.as_str()) {
        return Err(SynthError::UnknownFormat(spec.format.clone()));
    }
    if !COMPRESSIONS.contains(&spec.compression.as_str()) {
        return Err(SynthError::UnknownCompression(spec.compression.clone()));
    }
    if !(spec.rate_pps > 0.0 && spec.rate_pps.is_finite()) {
        return bad("rate_pps must be a positive number");
    }
    if spec.id_width != 4 && spec.id_width != 8 {
        return bad("id_width must be 4 or 8");
    }
    for (name, p) in [
        ("loss", spec.loss),
        ("duplicate", spec.duplicate),
        ("reorder", spec.reorder),
        ("foreign", spec.foreign),
        ("spike_probability", spec.spike_probability),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(SynthError::InvalidSpec(format!("{name} must be a probability in [0, 1]")));
        }
    }
    if spec.format == "moonsniff" && spec.id_width != 4 {
        return bad("MoonSniff records carry 32-bit ids: use id_width 4");
    }
    if spec.truncate_post_bytes > 0 && spec.compression != "none" {
        return bad("truncate_post_bytes works on uncompressed files only");
    }
    if spec.burst == 0 || spec.flows == 0 || spec.loss_burst == 0 {
        return bad("burst, flows and loss_burst must be at least 1");
    }
    flow_schedule(spec)?;
    Ok(())
}

/// Which flow each packet is of: round robin, or by `flow_weights`.
fn flow_schedule(spec: &SynthSpec) -> Result<FlowSchedule, SynthError> {
    if spec.flow_weights.is_empty() {
        return Ok(FlowSchedule::round_robin(spec.flows));
    }
    if spec.flow_weights.len() != usize::from(spec.flows) {
        return Err(SynthError::InvalidSpec(format!(
            "flow_weights has {} weights for {} flows: one per flow",
            spec.flow_weights.len(),
            spec.flows
        )));
    }
    FlowSchedule::weighted(&spec.flow_weights).map_err(|e| SynthError::InvalidSpec(e.to_string()))
}

/// Write PRE and POST captures (and the truth as Parquet when `truth` is given).
///
/// All or nothing: the spec and the frames it describes are checked before any file is
/// touched, the files are written beside their targets under temporary names, and renamed
/// into place together at the end; a failure removes the temporary files and leaves
/// whatever the targets held before.
pub fn generate(spec: &SynthSpec, pre: &Path, post: &Path, truth: Option<&Path>) -> Result<SynthSummary, SynthError> {
    validate(spec)?;
    let template = FrameTemplate::new(&template_spec(spec))?;
    let targets: Vec<&Path> = [Some(pre), Some(post), truth].into_iter().flatten().collect();
    let staged = Staged::new(&targets)?;
    let truth_tmp = truth.map(|_| staged.tmp(2));
    let summary = write_pair(spec, template, staged.tmp(0), staged.tmp(1), truth_tmp).map_err(|e| staged.named(e))?;
    staged.commit()?;
    Ok(summary)
}

/// The frames of the test traffic the spec describes.
fn template_spec(spec: &SynthSpec) -> TemplateSpec {
    let id_spec = IdSpec {
        offset: spec.id_offset,
        width: spec.id_width,
        endian: if spec.id_big_endian { Endian::Big } else { Endian::Little },
        udp_dst_port: None,
    };
    let (src_ip, dst_ip): (IpAddr, IpAddr) = if spec.ipv6 {
        ("fd00:6c74::1".parse().unwrap(), "fd00:6c74::2".parse().unwrap())
    } else {
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    };
    TemplateSpec {
        vlan: match spec.vlan {
            0 => Vlan::None,
            1 => Vlan::Single(100),
            _ => Vlan::Double(200, 100),
        },
        src_ip,
        dst_ip,
        dst_port: spec.udp_dst_port,
        frame_size: spec.frame_size,
        id: id_spec,
        ..TemplateSpec::default()
    }
}

/// Output files written under temporary names beside their targets (`.NAME.partial`),
/// renamed into place by `commit`; dropped before that, it removes them.
struct Staged {
    files: Vec<(PathBuf, PathBuf)>,
    committed: bool,
}

impl Staged {
    fn new(targets: &[&Path]) -> Result<Staged, SynthError> {
        let mut files = Vec::new();
        for target in targets {
            let Some(name) = target.file_name() else {
                let source = std::io::Error::other("not a file name");
                return Err(SynthError::File { path: target.to_path_buf(), source });
            };
            let tmp = target.with_file_name(format!(".{}.partial", name.to_string_lossy()));
            files.push((tmp, target.to_path_buf()));
        }
        Ok(Staged { files, committed: false })
    }

    fn tmp(&self, i: usize) -> &Path {
        &self.files[i].0
    }

    /// An error about a temporary file, told about the file the user named.
    fn named(&self, e: SynthError) -> SynthError {
        match e {
            SynthError::File { path, source } => {
                let target = self.files.iter().find(|(tmp, _)| *tmp == path).map_or(path, |(_, t)| t.clone());
                SynthError::File { path: target, source }
            }
            other => other,
        }
    }

    /// Rename every file into place (renames within a directory: they fail only when the
    /// directory itself goes away).
    fn commit(mut self) -> Result<(), SynthError> {
        for (tmp, target) in &self.files {
            std::fs::rename(tmp, target).map_err(|source| SynthError::File { path: target.clone(), source })?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            for (tmp, _) in &self.files {
                let _ = std::fs::remove_file(tmp);
            }
        }
    }
}

/// The walk over the packets, writing both captures (and the truth) to these files.
fn write_pair(
    spec: &SynthSpec,
    mut template: FrameTemplate,
    pre: &Path,
    post: &Path,
    truth: Option<&Path>,
) -> Result<SynthSummary, SynthError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut pre_out = CaptureOut::create(pre, &spec.format, &spec.compression, spec.snaplen, &spec.tsresol)?;
    let mut post_out = CaptureOut::create(post, &spec.format, &spec.compression, spec.snaplen, &spec.tsresol)?;
    let moonsniff = pre_out.is_moonsniff();
    let arp = foreign_arp();
    let tcp = foreign_tcp();

    let mut truth_w = match truth {
        Some(p) => Some(TruthWriter::create(p)?),
        None => None,
    };
    let mut summary = SynthSummary { packets: spec.packets, ..SynthSummary::default() };
    let schedule = flow_schedule(spec)?;
    let interval_ns = 1e9 / spec.rate_pps * spec.burst as f64;
    let min_latency = spec.base_latency_ns + spec.post_clock_offset_ns;
    let mut heap: BinaryHeap<Reverse<Departure>> = BinaryHeap::new();
    let mut loss_left = 0u32;
    let mut last_post_seq = None;
    let mut last_fifo_departure = i64::MIN;
    let ifaces = pre_out.interfaces();

    let mut write_post = |d: Departure,
                          out: &mut CaptureOut,
                          rng: &mut Xoshiro256PlusPlus,
                          summary: &mut SynthSummary,
                          template: &mut FrameTemplate|
     -> std::io::Result<()> {
        let id = spec.first_id.wrapping_add(d.seq);
        let iface = (d.seq as usize) % ifaces;
        if moonsniff {
            out.record(d.ts, id as u32)?;
        } else {
            template.set_src_port(49152 + schedule.flow_of(d.seq) as u16);
            out.frame(iface, d.ts, template.frame(id))?;
            if spec.foreign > 0.0 && rng.random_bool(spec.foreign) {
                out.frame(iface, d.ts, &tcp)?;
                summary.foreign_post += 1;
            }
        }
        last_post_seq = Some(d.seq);
        Ok(())
    };

    for seq in 0..spec.packets {
        let burst_no = seq / spec.burst as u64;
        let in_burst = (seq % spec.burst as u64) as i64;
        let ideal = spec.start_ns + (burst_no as f64 * interval_ns) as i64 + in_burst * spec.burst_gap_ns;
        let iface = (seq as usize) % ifaces;
        let pre_ts = pre_out.resolution(iface).as_read(ideal);
        while let Some(Reverse(d)) = heap.peek().copied() {
            if d.ts >= pre_ts + min_latency {
                break;
            }
            heap.pop();
            write_post(d, &mut post_out, &mut rng, &mut summary, &mut template)?;
        }
        let id = spec.first_id.wrapping_add(seq);
        if moonsniff {
            pre_out.record(pre_ts, id as u32)?;
        } else {
            template.set_src_port(49152 + schedule.flow_of(seq) as u16);
            pre_out.frame(iface, pre_ts, template.frame(id))?;
            if spec.foreign > 0.0 && rng.random_bool(spec.foreign) {
                pre_out.frame(iface, pre_ts, &arp)?;
                summary.foreign_pre += 1;
            }
        }

        let lost = if loss_left > 0 {
            loss_left -= 1;
            true
        } else if spec.loss > 0.0 && rng.random_bool(spec.loss) {
            loss_left = spec.loss_burst - 1;
            true
        } else {
            false
        };
        let mut copies = 0u8;
        let mut post_ts = None;
        if !lost {
            let (mut latency, overtakable) = latency_of(spec, &mut rng, pre_ts);
            latency += flow_offset(spec, schedule.flow_of(seq));
            let mut ts = pre_out.resolution(iface).as_read(pre_ts + latency + spec.post_clock_offset_ns);
            if spec.fifo && !overtakable {
                ts = ts.max(last_fifo_departure);
                last_fifo_departure = ts;
            }
            heap.push(Reverse(Departure { ts, seq, copy: 0 }));
            copies = 1;
            post_ts = Some(ts);
            if spec.duplicate > 0.0 && rng.random_bool(spec.duplicate) {
                heap.push(Reverse(Departure { ts: ts + 100, seq, copy: 1 }));
                copies = 2;
                summary.duplicates += 1;
            }
        } else {
            summary.lost += 1;
        }
        if let Some(t) = truth_w.as_mut() {
            t.push(id_for_truth(spec, seq), pre_ts, post_ts, copies, schedule.flow_of(seq))?;
        }
    }
    while let Some(Reverse(d)) = heap.pop() {
        write_post(d, &mut post_out, &mut rng, &mut summary, &mut template)?;
    }
    pre_out.finish()?;
    post_out.finish()?;
    if let Some(t) = truth_w {
        t.finish()?;
    }
    if spec.truncate_post_bytes > 0 {
        let f = OpenOptions::new().write(true).open(post)?;
        let len = f.metadata()?.len();
        f.set_len(len.saturating_sub(spec.truncate_post_bytes))?;
        summary.truncated_id = last_post_seq.map(|s| id_for_truth(spec, s));
    }
    summary.pre_bytes = std::fs::metadata(pre)?.len();
    summary.post_bytes = std::fs::metadata(post)?.len();
    Ok(summary)
}

/// The id as `lowtail analyze` reports it: 64-bit ids as written, 32-bit ids unwrapped
/// (the first one in epoch zero).
fn id_for_truth(spec: &SynthSpec, seq: u64) -> u64 {
    if spec.id_width == 4 {
        (spec.first_id & 0xffff_ffff) + seq
    } else {
        spec.first_id.wrapping_add(seq)
    }
}

/// The latency every packet of `flow` has on top of the model's.
fn flow_offset(spec: &SynthSpec, flow: u32) -> i64 {
    match spec.flow_offsets_ns.len() {
        0 => 0,
        n => spec.flow_offsets_ns[flow as usize % n],
    }
}

/// Latency of one packet, and whether it was picked to be overtaken.
fn latency_of(spec: &SynthSpec, rng: &mut Xoshiro256PlusPlus, pre_ts: i64) -> (i64, bool) {
    let mut lat = spec.base_latency_ns;
    if spec.jitter_ns > 0.0 {
        let u: f64 = rng.random::<f64>();
        lat += (-(1.0 - u).ln() * spec.jitter_ns) as i64;
    }
    if spec.irq_period_ns > 0 && !spec.irq_durations_ns.is_empty() {
        let k = pre_ts.div_euclid(spec.irq_period_ns);
        let phase = pre_ts.rem_euclid(spec.irq_period_ns);
        let dur = spec.irq_durations_ns[(k as usize) % spec.irq_durations_ns.len()];
        if phase < dur {
            lat += dur - phase;
        }
    }
    if spec.spike_probability > 0.0 && rng.random_bool(spec.spike_probability) {
        lat += spec.spike_ns;
    }
    let overtakable = spec.reorder > 0.0 && rng.random_bool(spec.reorder);
    if overtakable {
        lat += spec.reorder_delay_ns;
    }
    (lat, overtakable)
}

fn foreign_arp() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f
}

fn foreign_tcp() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&40u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6; // TCP
    f
}

/// Per-packet ground truth in PRE order: id, both times (POST's empty when lost), copies
/// that reached POST, and the flow (the index `lowtail analyze` gives it: flows appear
/// in flow order at the start of every cycle of the schedule).
struct TruthWriter {
    writer: ArrowWriter<std::fs::File>,
    schema: Arc<Schema>,
    id: Vec<u64>,
    pre: Vec<i64>,
    post: Vec<Option<i64>>,
    copies: Vec<u8>,
    flow: Vec<u32>,
}

impl TruthWriter {
    fn create(path: &Path) -> Result<Self, SynthError> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::UInt64, false),
            Field::new("pre_ts_ns", DataType::Int64, false),
            Field::new("post_ts_ns", DataType::Int64, true),
            Field::new("copies", DataType::UInt8, false),
            Field::new("flow", DataType::UInt32, false),
        ]));
        let file =
            std::fs::File::create(path).map_err(|source| SynthError::File { path: path.to_path_buf(), source })?;
        let writer = ArrowWriter::try_new(file, schema.clone(), None)?;
        Ok(TruthWriter { writer, schema, id: vec![], pre: vec![], post: vec![], copies: vec![], flow: vec![] })
    }

    fn push(&mut self, id: u64, pre: i64, post: Option<i64>, copies: u8, flow: u32) -> Result<(), SynthError> {
        self.id.push(id);
        self.flow.push(flow);
        self.pre.push(pre);
        self.post.push(post);
        self.copies.push(copies);
        if self.id.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SynthError> {
        if self.id.is_empty() {
            return Ok(());
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(std::mem::take(&mut self.id))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.pre))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.post))),
            Arc::new(UInt8Array::from(std::mem::take(&mut self.copies))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.flow))),
        ];
        let batch = RecordBatch::try_new(self.schema.clone(), cols)?;
        Ok(self.writer.write(&batch)?)
    }

    fn finish(mut self) -> Result<(), SynthError> {
        self.flush()?;
        self.writer.close()?;
        Ok(())
    }
}
