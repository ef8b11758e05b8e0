//! The merge of both captures in time order, the matcher, and the figures.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::time::Instant;

use lowtail_capture::Progress;
use lowtail_match::suggest::explain;
use lowtail_match::{Counters, MatchSink, Matched, Matcher, Outcome, Unwrapper};
use lowtail_stats::{
    auto_bins, ExactHistogram, HdrRecorder, Quantile, SeriesSummary, TimeBlocks, WorstN, HEADLINE_PERCENTILES,
};

use crate::error::{human_ns, AnalyzeError, ExportError};
use crate::export::SeriesWriter;
use crate::figures::{Analysis, FlowFigures, FlowsPart, LatencySummary};
use crate::memory::MemoryLimit;
use crate::options::AnalyzeOptions;
use crate::reader::{Batch, FlowTable, ReaderConfig, Role, SideReader, SideReport, Stamp, StartClock, MAX_FLOWS};

/// Lets another thread follow progress and cancel.
#[derive(Debug, Clone, Default)]
pub struct Control {
    /// Set to stop the analysis; it then returns `AnalyzeError::Cancelled`.
    pub cancel: Arc<AtomicBool>,
    /// Bytes of the PRE file read so far.
    pub pre_bytes: Progress,
    /// Bytes of the POST file read so far.
    pub post_bytes: Progress,
}

/// 32-bit ids are shown as they were sent: unwrapped, first epoch at zero.
const WRAP_BIAS: u64 = 1 << 32;

/// One flow's packet counts.
#[derive(Debug, Clone, Copy, Default)]
struct FlowCounts {
    sent: u64,
    received: u64,
    lost: u64,
    negative: u64,
}

/// The figures of each flow. While every received packet is of flow 0 the pooled
/// histogram is flow 0's, so nothing is recorded twice: a run of one flow costs a few
/// counters per packet. The first received packet of another flow splits them (flow 0's
/// histogram starts as a copy of the pooled one).
#[derive(Default)]
struct PerFlow {
    counts: Vec<FlowCounts>,
    /// Each flow's latencies, once split; empty before.
    latencies: Vec<ExactHistogram>,
}

impl PerFlow {
    #[inline(always)]
    fn counts(&mut self, flow: u32) -> &mut FlowCounts {
        let f = flow as usize;
        if f >= self.counts.len() {
            self.grow(f);
        }
        &mut self.counts[f]
    }

    #[cold]
    fn grow(&mut self, f: usize) {
        self.counts.resize(f + 1, FlowCounts::default());
    }

    /// Record a received packet's latency in its flow; `pooled` holds every latency
    /// recorded before this one.
    #[inline(always)]
    fn record(&mut self, flow: u32, latency: i64, pooled: &ExactHistogram) {
        if self.latencies.is_empty() {
            if flow == 0 {
                return;
            }
            self.split(pooled);
        }
        let f = flow as usize;
        if f >= self.latencies.len() {
            self.latencies.resize_with(f + 1, ExactHistogram::new);
        }
        self.latencies[f].record(latency);
    }

    #[cold]
    fn split(&mut self, pooled: &ExactHistogram) {
        self.latencies.push(pooled.clone());
    }

    /// Each flow's figures; `pooled` is the run's histogram (flow 0's when never split).
    fn figures(mut self, table: FlowTable, pooled: &mut ExactHistogram) -> FlowsPart {
        let (key, flows, overflowed) = table.finish();
        let mut out = Vec::with_capacity(flows.len());
        for (i, flow) in flows.iter().enumerate() {
            let c = self.counts.get(i).copied().unwrap_or_default();
            let latency_ns = if self.latencies.is_empty() {
                if i == 0 {
                    summarize(pooled)
                } else {
                    None
                }
            } else {
                self.latencies.get_mut(i).and_then(summarize)
            };
            let label = if overflowed && i == MAX_FLOWS - 1 { "other flows".to_string() } else { flow.describe(key) };
            out.push(FlowFigures {
                flow: i as u32,
                key: label,
                sent: c.sent,
                received: c.received,
                lost: c.lost,
                negative: c.negative,
                latency_ns,
            });
        }
        FlowsPart { key: key.name().to_string(), overflowed, flows: out }
    }
}

/// Receives matched packets in PRE order and turns them into figures.
struct FigureSink {
    flows: PerFlow,
    exact: ExactHistogram,
    /// The same latencies by time block (with `exact`, the run's summary).
    blocks: TimeBlocks,
    /// How early each packet with a negative latency arrived (its latency negated).
    early: ExactHistogram,
    worst: WorstN,
    id_bias: u64,
    export: Option<SeriesWriter>,
    export_error: Option<ExportError>,
}

impl MatchSink for FigureSink {
    #[inline(always)] // into the matcher's expiry loop: a call per packet cost a third of the work
    fn resolved(&mut self, outcome: Outcome, m: &Matched) {
        let counts = self.flows.counts(m.flow);
        counts.sent += 1;
        match outcome {
            Outcome::Received => counts.received += 1,
            Outcome::Negative => {
                counts.received += 1;
                counts.negative += 1;
                return self.early.record(m.pre_ts.saturating_sub(m.post_ts));
            }
            Outcome::Lost => {
                counts.lost += 1;
                return;
            }
        }
        // saturating: corrupt timestamps can be a whole i64 range apart
        let latency = m.post_ts.saturating_sub(m.pre_ts);
        let id = m.id.wrapping_sub(self.id_bias);
        self.flows.record(m.flow, latency, &self.exact);
        self.exact.record(latency);
        self.blocks.record(m.pre_ts, latency);
        self.worst.offer(latency, m.pre_ts, id);
        if let Some(w) = self.export.as_mut() {
            if let Err(e) = w.push(id, m.pre_ts, m.post_ts, m.flow) {
                self.export_error.get_or_insert(e);
            }
        }
    }
}

/// The merge side of a reader thread: a cursor over its batches.
struct Cursor {
    batches: Receiver<Batch>,
    recycle: SyncSender<Batch>,
    batch: Batch,
    pos: usize,
    done: bool,
    unwrapper: Option<Unwrapper>,
}

impl Cursor {
    fn new(r: &SideReader, batches: Receiver<Batch>) -> Cursor {
        Cursor {
            batches,
            recycle: r.recycle.clone(),
            batch: Batch::new(),
            pos: 0,
            done: false,
            unwrapper: r.wraps.then(Unwrapper::default),
        }
    }

    /// The stamps not yet merged, fetching the next batch when the current one is used up;
    /// empty once the reader is done.
    fn pending(&mut self) -> &[Stamp] {
        while self.pos == self.batch.len() && !self.done {
            match self.batches.recv() {
                Ok(b) => {
                    let used = std::mem::replace(&mut self.batch, b);
                    let _ = self.recycle.try_send(used);
                    self.pos = 0;
                }
                Err(_) => self.done = true,
            }
        }
        &self.batch[self.pos..]
    }
}

/// A stamp's id as the matcher takes it: 32-bit ids unwrapped, anchored near the other
/// side's latest id.
#[inline(always)]
fn id_of<const WRAPS: bool>(raw: u64, own: &mut Option<Unwrapper>, other: &Option<Unwrapper>) -> u64 {
    match own {
        Some(u) if WRAPS => u.unwrap(raw as u32, other.as_ref().and_then(Unwrapper::last)),
        _ => raw,
    }
}

/// How the merge ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Merged {
    /// Both captures read to their end.
    Done,
    /// `Control::cancel` was set.
    Cancelled,
    /// The matcher outgrew its memory limit.
    OutOfMemory,
}

/// Both sides to the matcher in time order (PRE first on equal times), a pair of batches
/// at a time, until both end, the analysis is cancelled or the matcher holds more than
/// `max_held_bytes`. One loop per id kind: without 32-bit ids to unwrap the per-packet
/// path has no unwrapping in it.
fn merge<S: MatchSink, const WRAPS: bool>(
    pre: &mut Cursor,
    post: &mut Cursor,
    matcher: &mut Matcher<S>,
    cancel: &AtomicBool,
    max_held_bytes: u64,
) -> Merged {
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Merged::Cancelled;
        }
        // Once a batch pair: the rings and maps grow by doubling, never by much within one.
        if matcher.held_bytes() as u64 > max_held_bytes {
            return Merged::OutOfMemory;
        }
        let (a, b) = (pre.pending().len(), post.pending().len());
        if a == 0 && b == 0 {
            return Merged::Done;
        }
        let (pre_stamps, post_stamps) = (&pre.batch[pre.pos..], &post.batch[post.pos..]);
        let (mut i, mut j) = (0, 0);
        // Until either batch is used up (`pending` then fetches its next one); a side that
        // has ended (no stamps pending) leaves the other to run alone.
        while i < a && j < b {
            if pre_stamps[i].ts <= post_stamps[j].ts {
                let s = pre_stamps[i];
                matcher.push_pre_in_flow(s.ts, id_of::<WRAPS>(s.id, &mut pre.unwrapper, &post.unwrapper), s.flow);
                i += 1;
            } else {
                let s = post_stamps[j];
                matcher.push_post(s.ts, id_of::<WRAPS>(s.id, &mut post.unwrapper, &pre.unwrapper));
                j += 1;
            }
        }
        if b == 0 {
            for s in pre_stamps {
                matcher.push_pre_in_flow(s.ts, id_of::<WRAPS>(s.id, &mut pre.unwrapper, &post.unwrapper), s.flow);
            }
            i = a;
        } else if a == 0 {
            for s in post_stamps {
                matcher.push_post(s.ts, id_of::<WRAPS>(s.id, &mut post.unwrapper, &pre.unwrapper));
            }
            j = b;
        }
        pre.pos += i;
        post.pos += j;
    }
}

/// Analyse a PRE/POST capture pair.
pub fn analyze_pair(
    pre_path: &Path,
    post_path: &Path,
    options: &AnalyzeOptions,
    control: &Control,
) -> Result<Analysis, AnalyzeError> {
    options.check()?;
    let started = Instant::now();
    let clock = Arc::new(StartClock::default());
    let side = |path, role, progress| ReaderConfig {
        path,
        spec: options.id_spec(),
        force_moonsniff: options.moonsniff_records,
        progress,
        cancel: control.cancel.clone(),
        clock: clock.clone(),
        role,
        trim_ns: options.trim_ns,
        flow_key: options.flow_key,
    };
    let (pre_reader, pre_rx) = SideReader::start(side(pre_path, Role::Pre, &control.pre_bytes))?;
    let (post_reader, post_rx) = SideReader::start(side(post_path, Role::Post, &control.post_bytes))?;
    let export = match &options.export {
        Some(p) => Some(SeriesWriter::create(p)?),
        None => None,
    };
    let wraps = pre_reader.wraps || post_reader.wraps;
    let sink = FigureSink {
        flows: PerFlow::default(),
        exact: ExactHistogram::new(),
        blocks: TimeBlocks::new(),
        early: ExactHistogram::new(),
        worst: WorstN::new(options.worst),
        id_bias: if wraps { WRAP_BIAS } else { 0 },
        export,
        export_error: None,
    };
    let mut matcher = Matcher::new(sink, options.trim_ns, options.max_latency_ns);
    let memory = MemoryLimit::for_analysis(options.max_memory_bytes);
    let max_held_bytes = memory.map_or(u64::MAX, |m| m.bytes);

    let mut pre = Cursor::new(&pre_reader, pre_rx);
    let mut post = Cursor::new(&post_reader, post_rx);
    let merged = if pre.unwrapper.is_some() || post.unwrapper.is_some() {
        merge::<_, true>(&mut pre, &mut post, &mut matcher, &control.cancel, max_held_bytes)
    } else {
        merge::<_, false>(&mut pre, &mut post, &mut matcher, &control.cancel, max_held_bytes)
    };
    let out_of_memory = match (merged, memory) {
        (Merged::OutOfMemory, Some(limit)) => {
            let (held, span_ns) = matcher.held_span();
            Some(AnalyzeError::OutOfMemory { limit, held, span_ns, horizon_ns: options.max_latency_ns })
        }
        _ => None,
    };
    let cancelled = merged != Merged::Done;
    // Dropping the cursors lets reader threads blocked on a full channel finish.
    drop(pre);
    drop(post);
    let pre_report = pre_reader.finish();
    let post_report = post_reader.finish();
    let start_ts = matcher.start_ts();
    let (counters, mut sink) = matcher.finish();
    let abandon = |sink: &mut FigureSink| {
        if let Some(w) = sink.export.take() {
            w.abandon();
        }
    };
    if cancelled {
        abandon(&mut sink);
        return Err(out_of_memory.unwrap_or(AnalyzeError::Cancelled));
    }
    let (mut pre_report, post_report) = match (pre_report, post_report) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            abandon(&mut sink);
            return Err(e);
        }
    };
    if let Some(e) = sink.export_error.take() {
        abandon(&mut sink);
        return Err(e.into());
    }
    if let Err(e) = check_something_to_report(&pre_report, &post_report, &counters, options, pre_path)
        .and_then(|()| check_not_swapped(&counters, &mut sink.early))
    {
        abandon(&mut sink);
        return Err(e);
    }

    let mut warnings: Vec<String> = Vec::new();
    warnings.extend(pre_report.warnings.iter().cloned());
    warnings.extend(post_report.warnings.iter().cloned());
    let partial = [&pre_report, &post_report].iter().any(|side| side.broken.is_some() || side.cut);
    for (name, side) in [("PRE", &pre_report), ("POST", &post_report)] {
        if let Some(err) = &side.broken {
            warnings.push(format!(
                "{name}: reading stopped part-way ({err}): the figures cover what came before and are partial"
            ));
        } else if side.cut {
            warnings.push(format!("{name} ends early: the figures cover what it holds and are partial"));
        }
    }
    collect_warnings(&mut warnings, &counters, &pre_report, &post_report, options);
    let table = pre_report.flows.take().unwrap_or_else(|| FlowTable::new(options.flow_key));
    let flows = std::mem::take(&mut sink.flows).figures(table, &mut sink.exact);
    if flows.overflowed {
        warnings.push(format!(
            "PRE holds more than {MAX_FLOWS} flows: the packets of flows beyond the first {} are counted together as \"other flows\"",
            MAX_FLOWS - 1
        ));
    }

    let export_rows = match sink.export.take() {
        Some(w) => w.finish()?,
        None => 0,
    };
    let hdr = HdrRecorder::from_exact(&mut sink.exact);
    let latency = summarize(&mut sink.exact);
    let (pre_summary, mut pre_jitter) = (pre_report.summary, pre_report.jitter);
    let (post_summary, mut post_jitter) = (post_report.summary, post_report.jitter);
    let duration_ns = match (start_ts, pre_summary.last_ts_ns) {
        (Some(s), Some(l)) => l.saturating_sub(s).saturating_sub(options.trim_ns).max(0),
        _ => 0,
    };
    let latency_histogram = auto_bins(&mut sink.exact, options.histogram_bins);
    Ok(Analysis {
        sent: counters.sent,
        received: counters.received,
        lost: counters.lost,
        duplicates: counters.duplicates,
        reordered: counters.reordered,
        foreign: pre_summary.foreign() + post_summary.foreign(),
        negative: counters.negative,
        unmatched: counters.unmatched,
        pre_duplicates: counters.pre_duplicates,
        trimmed_pre: counters.trimmed_pre,
        trimmed_post: counters.trimmed_post,
        trim_ns: options.trim_ns,
        horizon_ns: options.max_latency_ns,
        start_ts_ns: start_ts,
        duration_ns,
        latency_ns: latency,
        percentiles: hdr.rows(5),
        hgrm: hdr.hgrm(5, 1000.0),
        latency_histogram,
        jitter_pre_histogram: auto_bins(&mut pre_jitter, options.histogram_bins),
        jitter_post_histogram: auto_bins(&mut post_jitter, options.histogram_bins),
        worst: sink.worst.into_time_order(),
        pre: pre_summary,
        post: post_summary,
        warnings,
        partial,
        export_path: options.export.as_ref().map(|p| p.display().to_string()),
        export_rows,
        elapsed_s: started.elapsed().as_secs_f64(),
        flows,
        summary: SeriesSummary { exact: sink.exact, blocks: sink.blocks },
    })
}

fn check_something_to_report(
    pre: &SideReport,
    post: &SideReport,
    counters: &Counters,
    options: &AnalyzeOptions,
    pre_path: &Path,
) -> Result<(), AnalyzeError> {
    if pre.summary.with_id == 0 {
        return Err(AnalyzeError::NoPacketIds {
            path: pre_path.to_path_buf(),
            frames: pre.summary.frames,
            why: explain(&options.id_spec(), &pre.sample, &post.sample),
        });
    }
    if counters.sent == 0 {
        let span_ns = pre.summary.last_ts_ns.unwrap_or(0).saturating_sub(pre.summary.first_ts_ns.unwrap_or(0));
        return Err(AnalyzeError::TrimRemovesAll { trim_ns: options.trim_ns, span_ns });
    }
    Ok(())
}

/// Most latencies negative: PRE and POST were swapped (or their clocks are far apart).
fn check_not_swapped(counters: &Counters, early: &mut ExactHistogram) -> Result<(), AnalyzeError> {
    if counters.negative.saturating_mul(2) <= counters.received {
        return Ok(());
    }
    Err(AnalyzeError::LooksSwapped {
        negative: counters.negative,
        received: counters.received,
        typical_early_ns: early.quantile(Quantile::decimal(5, 1)).unwrap_or(0),
    })
}

fn summarize(h: &mut ExactHistogram) -> Option<LatencySummary> {
    let qs: Vec<Quantile> = HEADLINE_PERCENTILES.iter().map(|(_, q)| *q).collect();
    let values = h.quantiles(&qs)?;
    let (mean, stddev) = h.mean_stddev()?;
    Some(LatencySummary {
        min: h.min()?,
        mean,
        stddev,
        percentiles: values.try_into().expect("one value per headline percentile"),
        max: h.max()?,
        samples: h.count(),
    })
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

fn collect_warnings(
    warnings: &mut Vec<String>,
    c: &Counters,
    pre: &SideReport,
    post: &SideReport,
    options: &AnalyzeOptions,
) {
    if c.negative > 0 {
        warnings.push(format!(
            "{} packets ({:.3} %) arrived before they were sent (negative latency): the two capture clocks disagree; they are excluded from the latency figures",
            c.negative,
            pct(c.negative, c.received)
        ));
    }
    if c.received * 100 < c.sent {
        let why = explain(&options.id_spec(), &pre.sample, &post.sample);
        warnings.push(format!(
            "only {} of {} sent packets ({:.2} %) were found in POST: {why}",
            c.received,
            c.sent,
            pct(c.received, c.sent)
        ));
    }
    for (name, side) in [("PRE", pre), ("POST", post)] {
        let s = &side.summary;
        if s.snapped > 0 {
            warnings.push(format!(
                "{name}: the snap length ({} bytes) cuts off the packet id in {} frames: capture with a larger snap length",
                s.snaplen, s.snapped
            ));
        }
        if s.frames > 0 && s.foreign() * 2 > s.frames {
            warnings.push(format!(
                "{name}: {} of {} frames ({:.1} %) carry no packet id and were skipped as foreign",
                s.foreign(),
                s.frames,
                pct(s.foreign(), s.frames)
            ));
        }
        if s.backwards > 0 {
            warnings.push(format!(
                "{name}: timestamps go backwards {} times (software timestamps on several CPUs?)",
                s.backwards
            ));
        }
    }
    if c.pre_duplicates > 0 {
        let mut w = format!("PRE holds {} repeated ids: only the first copy of each was matched", c.pre_duplicates);
        // More repeats than distinct ids: the id is read from the wrong place.
        if c.pre_duplicates > c.sent + c.trimmed_pre {
            w = format!("{w}: {}", explain(&options.id_spec(), &pre.sample, &post.sample));
        }
        warnings.push(w);
    }
    if c.unmatched > 0 {
        warnings.push(format!(
            "POST holds {} packets whose id PRE never sent within {}",
            c.unmatched,
            human_ns(options.max_latency_ns)
        ));
    }
    if let (Some(pre_end), Some(post_end)) = (pre.summary.last_ts_ns, post.summary.last_ts_ns) {
        if post_end.saturating_add(options.max_latency_ns) < pre_end {
            warnings.push(format!(
                "POST ends {} before PRE: packets sent after POST stopped count as lost",
                human_ns(pre_end.saturating_sub(post_end))
            ));
        }
    }
}
