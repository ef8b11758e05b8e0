//! One thread per capture: read, decode, find ids, and hand (timestamp, id) batches to
//! the matcher. Decoding is half the work, so it runs beside the matching.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use lowtail_capture::{open, CaptureError, CaptureReader, Item, OpenOptions, Progress};
use lowtail_frame::{quick_flow_bytes, Flow, FlowKey};
use lowtail_match::suggest::SampleFrame;
use lowtail_match::{extract_id, Extracted, IdSpec};
use lowtail_stats::{ExactHistogram, PerSecond};

use crate::error::AnalyzeError;
use crate::figures::SideSummary;

const BATCH: usize = 16384;
const SAMPLE_FRAMES: usize = 2000;

/// Timestamp, raw id and flow (an index into PRE's `FlowTable`; 0 on POST) of an
/// id-carrying frame.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stamp {
    pub ts: i64,
    pub id: u64,
    pub flow: u32,
}

/// The most flows an analysis tells apart: beyond them, packets of new flows are counted
/// together as one more flow ("other flows"), and a warning says so. Each flow keeps its
/// own exact latency histogram.
pub const MAX_FLOWS: usize = 4096;

pub(crate) type Batch = Vec<Stamp>;

/// PRE's flows in order of first appearance: a packet's flow becomes a small index.
pub(crate) struct FlowTable {
    pub key: FlowKey,
    /// The flow of each index; the last is "other flows" once the table is full.
    pub flows: Vec<Flow>,
    /// The flows have outgrown `MAX_FLOWS`.
    pub overflowed: bool,
    by_flow: rustc_hash::FxHashMap<Flow, u32>,
    /// The previous packet's flow and index: with one flow (or runs of one) no lookup.
    last: Option<(Flow, u32)>,
    /// The previous packet's `quick_flow_bytes` and index, when it had that shape: the same
    /// bytes again are the same flow without building it.
    last_quick: Option<(u128, u32)>,
}

impl FlowTable {
    pub(crate) fn new(key: FlowKey) -> FlowTable {
        FlowTable {
            key,
            flows: Vec::new(),
            overflowed: false,
            by_flow: Default::default(),
            last: None,
            last_quick: None,
        }
    }

    /// The index of this frame's flow.
    #[inline(always)]
    fn index(&mut self, link: lowtail_capture::LinkType, data: &[u8]) -> u32 {
        let quick = quick_flow_bytes(link, data);
        if let (Some(bytes), Some((last, index))) = (quick, self.last_quick) {
            if bytes == last {
                return index;
            }
        }
        let index = self.index_of(link, data);
        self.last_quick = quick.map(|bytes| (bytes, index));
        index
    }

    #[inline]
    fn index_of(&mut self, link: lowtail_capture::LinkType, data: &[u8]) -> u32 {
        let flow = self.key.flow_of(link, data);
        match self.last {
            Some((last, index)) if last == flow => index,
            _ => self.look_up(flow),
        }
    }

    #[inline]
    fn look_up(&mut self, flow: Flow) -> u32 {
        let index = match self.by_flow.get(&flow) {
            Some(&i) => i,
            None => self.add(flow),
        };
        self.last = Some((flow, index));
        index
    }

    #[cold]
    fn add(&mut self, flow: Flow) -> u32 {
        if self.flows.len() >= MAX_FLOWS {
            self.overflowed = true;
            return (MAX_FLOWS - 1) as u32;
        }
        let index = self.flows.len() as u32;
        self.flows.push(flow);
        self.by_flow.insert(flow, index);
        index
    }

    /// The flows, at least one: records without headers (MoonSniff) are all flow 0.
    pub(crate) fn finish(mut self) -> (FlowKey, Vec<Flow>, bool) {
        if self.flows.is_empty() {
            self.flows.push(Flow::default());
        }
        (self.key, self.flows, self.overflowed)
    }
}

/// Time zero of the analysis: the first PRE packet with an id. The PRE reader
/// publishes it; the POST reader waits for it to place its packets in the same
/// seconds and the same warm-up trim.
pub(crate) struct StartClock(AtomicI64);

const UNKNOWN: i64 = i64::MIN;
const NONE: i64 = i64::MAX;

impl Default for StartClock {
    fn default() -> Self {
        StartClock(AtomicI64::new(UNKNOWN))
    }
}

impl StartClock {
    fn publish(&self, t0: i64) {
        self.0.store(t0, Ordering::Release);
    }

    /// The start time, `None` when PRE has no packet at all (or the run is cancelled).
    fn wait(&self, cancel: &AtomicBool) -> Option<i64> {
        loop {
            match self.0.load(Ordering::Acquire) {
                UNKNOWN if !cancel.load(Ordering::Relaxed) => std::thread::sleep(std::time::Duration::from_micros(50)),
                UNKNOWN | NONE => return None,
                t0 => return Some(t0),
            }
        }
    }
}

/// Publishes "no start" if the PRE reader ends (or fails) before seeing a packet, so
/// the POST reader never waits forever.
struct PublishOnDrop(Arc<StartClock>);

impl Drop for PublishOnDrop {
    fn drop(&mut self) {
        let _ = self.0 .0.compare_exchange(UNKNOWN, NONE, Ordering::AcqRel, Ordering::Acquire);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Pre,
    Post,
}

pub(crate) struct ReaderConfig<'a> {
    pub path: &'a Path,
    pub spec: IdSpec,
    pub force_moonsniff: bool,
    pub progress: &'a Progress,
    pub cancel: Arc<AtomicBool>,
    pub clock: Arc<StartClock>,
    pub role: Role,
    pub trim_ns: i64,
    /// What tells PRE's flows apart (POST's are not looked at).
    pub flow_key: FlowKey,
}

/// Packets per second since time zero and inter-arrival times after the warm-up.
struct Traffic {
    rate: PerSecond,
    jitter: ExactHistogram,
    steady_from: i64,
    /// The previous steady-state arrival; `NO_ARRIVAL` before the first (a sentinel, not
    /// an Option: this runs for every frame).
    prev: i64,
}

const NO_ARRIVAL: i64 = i64::MIN;

impl Default for Traffic {
    fn default() -> Self {
        Traffic { rate: PerSecond::default(), jitter: ExactHistogram::default(), steady_from: 0, prev: NO_ARRIVAL }
    }
}

impl Traffic {
    fn start(&mut self, t0: i64, trim_ns: i64) {
        self.rate.set_start(t0);
        self.steady_from = t0.saturating_add(trim_ns);
    }

    #[inline]
    fn see(&mut self, ts: i64) {
        self.rate.count(ts);
        if ts >= self.steady_from {
            if self.prev != NO_ARRIVAL {
                self.jitter.record(ts.saturating_sub(self.prev));
            }
            self.prev = ts;
        }
    }
}

/// What a reader thread knows once its file is done.
pub(crate) struct SideReport {
    pub summary: SideSummary,
    /// Inter-arrival times of id-carrying frames after the warm-up.
    pub jitter: ExactHistogram,
    pub warnings: Vec<String>,
    pub sample: Vec<SampleFrame>,
    /// Why reading stopped part-way (corruption at an offset, a later pcapng section of
    /// a version libpcap does not read): the figures cover what came before.
    pub broken: Option<String>,
    /// The capture ends early: cut inside a record, or a compressed stream before its end.
    pub cut: bool,
    /// PRE's flows (None on POST).
    pub flows: Option<FlowTable>,
}

pub(crate) struct SideReader {
    pub recycle: SyncSender<Batch>,
    /// 32-bit ids that the matcher must unwrap.
    pub wraps: bool,
    handle: JoinHandle<Result<SideReport, AnalyzeError>>,
}

impl SideReader {
    /// Open the file here (so errors surface before any thread starts), then read it
    /// on a thread of its own; batches arrive on the returned receiver.
    pub(crate) fn start(config: ReaderConfig<'_>) -> Result<(SideReader, Receiver<Batch>), AnalyzeError> {
        let ReaderConfig { path, spec, force_moonsniff, progress, cancel, clock, role, trim_ns, flow_key } = config;
        let publish_guard = (role == Role::Pre).then(|| PublishOnDrop(clock.clone()));
        let options = OpenOptions { force_moonsniff, progress: Some(progress.clone()), cancel: Some(cancel.clone()) };
        let reader = open(path, &options)?;
        let wraps = spec.width == 4 || reader.format() == lowtail_capture::Format::MoonSniff;
        let summary = SideSummary {
            path: path.display().to_string(),
            format: reader.format().name().to_string(),
            compression: reader.compression().name().to_string(),
            bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            snaplen: reader.snaplen(),
            ..SideSummary::default()
        };
        let (tx, rx) = sync_channel::<Batch>(16);
        let (recycle_tx, recycle_rx) = sync_channel::<Batch>(32);
        let handle = std::thread::Builder::new()
            .name("lowtail-read".into())
            .spawn(move || {
                let _publish_guard = publish_guard;
                let side = SideContext { spec, cancel, clock, role, trim_ns, flow_key };
                read_side(reader, side, summary, tx, recycle_rx)
            })
            .expect("spawn reader thread");
        Ok((SideReader { recycle: recycle_tx, wraps, handle }, rx))
    }

    /// Wait for the thread (drop the receiver first, or it may wait on a full channel).
    pub(crate) fn finish(self) -> Result<SideReport, AnalyzeError> {
        self.handle.join().unwrap_or_else(|_| Err(AnalyzeError::ReaderPanicked))
    }
}

/// What the reader thread needs besides the capture and its channels.
struct SideContext {
    spec: IdSpec,
    cancel: Arc<AtomicBool>,
    clock: Arc<StartClock>,
    role: Role,
    trim_ns: i64,
    flow_key: FlowKey,
}

/// A reader thread's tallies of the frames it has seen.
struct SideTally {
    spec: IdSpec,
    traffic: Traffic,
    /// Time zero is known (PRE: its first stamp; POST: once PRE published it).
    timed: bool,
    /// The latest stamp's time; `NO_STAMP` before the first.
    last_ts: i64,
    sample: Vec<SampleFrame>,
    batch: Batch,
    /// PRE's flows; None on POST.
    flows: Option<FlowTable>,
    frames: u64,
    not_udp: u64,
    too_short: u64,
    snapped: u64,
    backwards: u64,
}

/// `last_ts` before any stamp (no timestamp is this small: it would be before 1678).
const NO_STAMP: i64 = i64::MIN;

impl SideTally {
    /// One frame or record, on the per-packet path: what is rare is out of line.
    #[inline(always)]
    fn see(&mut self, item: Item<'_>, side: &SideContext) {
        self.frames += 1;
        let (ts, extracted, flow) = match item {
            Item::Record { ts_ns, id } => (ts_ns, Extracted::Id(id as u64), 0),
            Item::Frame(f) => {
                if self.sample.len() < SAMPLE_FRAMES {
                    self.keep_sample(&f);
                }
                let extracted = extract_id(f.link, f.data, f.orig_len, &self.spec);
                let flow = match (&mut self.flows, extracted) {
                    (Some(table), Extracted::Id(_)) => table.index(f.link, f.data),
                    _ => 0,
                };
                (f.ts_ns, extracted, flow)
            }
        };
        match extracted {
            Extracted::Id(id) => {
                if self.last_ts == NO_STAMP {
                    self.first_stamp(ts, side);
                }
                if self.timed {
                    self.traffic.see(ts);
                }
                self.backwards += (ts < self.last_ts) as u64;
                self.last_ts = ts;
                self.batch.push(Stamp { ts, id, flow });
            }
            Extracted::NotUdp => self.not_udp += 1,
            Extracted::TooShort => self.too_short += 1,
            Extracted::Snapped => self.snapped += 1,
        }
    }

    /// The first frames are kept to explain a poor match.
    #[cold]
    fn keep_sample(&mut self, f: &lowtail_capture::Frame<'_>) {
        self.sample.push(SampleFrame { link: f.link, data: f.data.to_vec(), orig_len: f.orig_len });
    }

    /// PRE's first stamp is time zero, published for POST, which waits for it.
    #[cold]
    fn first_stamp(&mut self, ts: i64, side: &SideContext) {
        let t0 = match side.role {
            Role::Pre => {
                side.clock.publish(ts);
                Some(ts)
            }
            Role::Post => side.clock.wait(&side.cancel),
        };
        if let Some(t0) = t0 {
            self.traffic.start(t0, side.trim_ns);
            self.timed = true;
        }
    }
}

fn read_side(
    mut reader: CaptureReader,
    side: SideContext,
    mut summary: SideSummary,
    tx: SyncSender<Batch>,
    recycle: Receiver<Batch>,
) -> Result<SideReport, AnalyzeError> {
    let mut t = SideTally {
        spec: side.spec,
        traffic: Traffic::default(),
        timed: false,
        last_ts: NO_STAMP,
        sample: Vec::new(),
        batch: Vec::with_capacity(BATCH),
        flows: (side.role == Role::Pre).then(|| FlowTable::new(side.flow_key)),
        frames: 0,
        not_udp: 0,
        too_short: 0,
        snapped: 0,
        backwards: 0,
    };
    let mut broken = None;
    loop {
        let room = BATCH - t.batch.len();
        // Inlined into the reader's loop: a call per frame cost a tenth of the reader's time.
        let visited = reader.for_each(
            room,
            #[inline(always)]
            |item| t.see(item, &side),
        );
        let visited = match visited {
            Ok(n) => n,
            // Damage after some frames: what came before stands, marked partial.
            Err(e @ (CaptureError::Corrupt { .. } | CaptureError::UnsupportedVersion { .. })) if t.frames > 0 => {
                broken = Some(e.to_string());
                0
            }
            Err(e) => return Err(e.into()),
        };
        if visited == 0 || t.batch.len() == BATCH {
            if side.cancel.load(Ordering::Relaxed) {
                return Err(AnalyzeError::Cancelled);
            }
            let mut next = recycle.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
            next.clear();
            let full = std::mem::replace(&mut t.batch, next);
            summary.with_id += full.len() as u64;
            if summary.first_ts_ns.is_none() {
                summary.first_ts_ns = full.first().map(|s| s.ts);
            }
            // A closed channel means the matcher stopped (an error on the other side).
            if (!full.is_empty() && tx.send(full).is_err()) || visited == 0 {
                break;
            }
        }
    }
    summary.frames = t.frames;
    summary.not_udp = t.not_udp;
    summary.too_short = t.too_short;
    summary.snapped = t.snapped;
    summary.backwards = t.backwards;
    summary.last_ts_ns = (t.last_ts != NO_STAMP).then_some(t.last_ts);
    summary.per_second = t.traffic.rate.counts().to_vec();
    let cut = reader.is_cut();
    Ok(SideReport {
        summary,
        jitter: t.traffic.jitter,
        warnings: reader.take_warnings(),
        sample: t.sample,
        broken,
        cut,
        flows: t.flows,
    })
}
