"""The coordinating process of a campaign: it submits every pair not stored yet to a Dask
cluster, stores each result as it arrives (the only process that writes the store), and
stops cleanly when the scheduler goes away or the user interrupts, keeping what finished.

A worker that dies mid-pair is Dask's to handle: the scheduler gives its pairs to another
worker. Each pair is stored in one transaction with its identity, so a pair is stored once
however often it was computed, and a campaign run again skips the pairs already stored."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lowtail.campaign import CampaignOptions
from lowtail.campaign.pairs import Pair, campaign_key
from lowtail.campaign.work import PairOutcome, PairTask, analyze_task
from lowtail.core.errors import UserError
from lowtail.store import DbPath, open_store
from lowtail.store import campaigns as stored

if TYPE_CHECKING:
    from distributed import Client, Future

    from lowtail.analyze.document import AnalysisDocument
    from lowtail.campaign.document import CampaignDocument, CampaignFailure, CampaignPairEntry, CampaignWorker
    from lowtail.store.campaigns import StoredPair
    from lowtail.store.db import Store

# How long the coordinator waits for a lost scheduler to come back before it stops.
SCHEDULER_GRACE_S = 5.0
# How long it waits on a cluster without a worker (a nanny restarts a killed one in seconds;
# workers may join late) before it stops: Dask itself would wait for ever.
WORKERLESS_GRACE_S = 30.0
POLL_S = 0.25


@dataclass
class Progress:
    """Where a campaign is: pairs done of all, packets analysed, seconds since it started."""

    done: int
    total: int
    packets: int
    elapsed_s: float

    @property
    def packets_per_s(self) -> float:
        """Packets (PRE and POST) analysed per second over the whole cluster."""
        return self.packets / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far; None before the first pair."""
        return self.elapsed_s / self.done * (self.total - self.done) if self.done else None


ProgressCallback = Callable[[Progress], None]


@dataclass
class CampaignResult:
    """What `campaign analyze --json` prints."""

    campaign_id: int
    pairs: list[CampaignPairEntry] = field(default_factory=list)
    failed: list[CampaignFailure] = field(default_factory=list)
    workers: list[CampaignWorker] = field(default_factory=list)
    stopped: str | None = None  # why the campaign stopped before its end
    interrupted: bool = False  # by the user (Ctrl-C), rather than by a lost scheduler

    @property
    def partial(self) -> bool:
        """Some pair failed or is partial itself, or the campaign stopped early."""
        return bool(self.failed or self.stopped or any(p["partial"] for p in self.pairs))

    def as_dict(self) -> CampaignDocument:
        """The --json document."""
        return {
            "campaign_id": self.campaign_id,
            "partial": self.partial,
            "stopped": self.stopped,
            "pairs": self.pairs,
            "failed": self.failed,
            "workers": self.workers,
        }


def _pair_entry(
    pair: Pair, analysis_id: int, worker: str | None, figures: AnalysisDocument | StoredPair, resumed: bool
) -> CampaignPairEntry:
    return {
        "name": pair.name,
        "pre": pair.pre,
        "post": pair.post,
        "analysis_id": analysis_id,
        "sent": figures["sent"],
        "lost": figures["lost"],
        "latency_ns": figures["latency_ns"],
        "partial": bool(figures["partial"]),
        "series": figures["export_path"],
        "worker": worker,
        "resumed": resumed,
    }


def _connect(scheduler: str | None) -> Client:
    """A client of the user's scheduler, or of a local cluster of this machine's cores."""
    from distributed import Client, LocalCluster

    # Dask logs every lost connection and retry on stderr; the campaign says what happened itself.
    for name in [*logging.root.manager.loggerDict, "tornado"]:
        if name.startswith(("distributed", "tornado")):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    if scheduler is None:
        cores = os.cpu_count() or 1
        # The worker processes start with SIGINT ignored (kept across exec; Python then installs
        # no handler of its own): a Ctrl-C reaches the whole process group, and only this
        # process should act on it — stop, keep what finished, close the cluster.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            cluster = LocalCluster(
                n_workers=cores,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.CRITICAL,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        return Client(cluster)
    try:
        return Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as e:
        raise UserError(f"--scheduler {scheduler}: cannot reach the scheduler ({e})") from None
    except ValueError as e:  # distributed's words for an address it cannot parse
        raise UserError(f"--scheduler {scheduler}: not a scheduler's address ({e}); e.g. tcp://HOST:8786") from None


def _close(client: Client) -> None:
    cluster = client.cluster
    try:
        client.close(timeout=3)
        if cluster is not None:
            cluster.close(timeout=5)
    except Exception:  # noqa: BLE001 - the scheduler may be gone already; nothing left to save
        pass


def _worker_addresses(client: Client) -> list[str]:
    try:
        return sorted(client.scheduler_info(n_workers=-1)["workers"])
    except Exception:  # noqa: BLE001 - a scheduler that is gone has no workers to list
        return []


class _Campaign:
    """One run of a campaign against one cluster."""

    def __init__(
        self, store: Store, campaign_id: int, options: CampaignOptions, on_progress: ProgressCallback | None
    ) -> None:
        self.store = store
        self.options = options
        self.result = CampaignResult(campaign_id)
        self.on_progress = on_progress
        self.packets = 0
        self.started = time.monotonic()
        self.done = 0
        self.total = 0
        self.by_worker: dict[str, int] = {}
        self.collected: set[str] = set()
        self.lost_since: float | None = None
        self.workerless_since: float | None = None

    def progress(self) -> None:
        if self.on_progress:
            self.on_progress(Progress(self.done, self.total, self.packets, time.monotonic() - self.started))

    def store_outcome(self, pair: Pair, outcome: PairOutcome) -> None:
        if outcome.doc is None:
            stored.save_failure(self.store, self.result.campaign_id, pair.as_dict(), outcome.error or "failed")
            self.result.failed.append({**pair.as_dict(), "error": outcome.error, "worker": outcome.worker})
        else:
            analysis_id, _ = stored.save_pair(
                self.store, self.result.campaign_id, pair.as_dict(), outcome.doc, self.options.analysis, outcome.worker
            )
            self.result.pairs.append(_pair_entry(pair, analysis_id, outcome.worker, outcome.doc, resumed=False))
            self.packets += outcome.doc["sent"] + outcome.doc["received"]
            self.by_worker[outcome.worker] = self.by_worker.get(outcome.worker, 0) + 1
        self.done += 1
        self.progress()

    def store_error(self, pair: Pair, error: str) -> None:
        stored.save_failure(self.store, self.result.campaign_id, pair.as_dict(), error)
        self.result.failed.append({**pair.as_dict(), "error": error, "worker": None})
        self.done += 1
        self.progress()

    def run(self, client: Client, todo: list[Pair]) -> None:
        from distributed import wait
        from distributed.client import FuturesCancelledError  # a CancelledError

        self.total += len(todo)
        started_with = set(_worker_addresses(client))
        futures: dict[Future[PairOutcome], Pair] = {}
        for pair in todo:
            assert pair.pre is not None and pair.post is not None
            series_dir = self.options.series_dir
            series = str(series_dir / f"{pair.name}-series.parquet") if series_dir else None
            task = PairTask(pair.name, pair.pre, pair.post, pair.key, self.options.analysis, series)
            futures[client.submit(analyze_task, task, key=f"lowtail-pair-{pair.key}", pure=False)] = pair
        pending = set(futures)
        self.progress()
        try:
            while pending:
                gone = False
                try:
                    finished, pending = wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    finished = set()
                except FuturesCancelledError:
                    # the client gave up on the scheduler and cancelled what was left
                    finished = {f for f in pending if f.status in ("finished", "error")}
                    pending -= finished
                    gone = True
                try:
                    for fut in finished:
                        if not self._collect(fut, futures[fut]):
                            pending.add(fut)  # its result went with its worker: Dask computes it again
                except (OSError, CancelledError):  # a result that could not be fetched: no scheduler
                    pending |= {f for f in finished if f.key not in self.collected}
                    gone = True
                why = "the scheduler went away" if gone else self._cluster_lost(client)
                if why is not None:
                    self.result.stopped = f"{why} after {self.done} of {self.total} pairs; {len(pending)} not analysed"
                    return
        except KeyboardInterrupt:
            self.result.interrupted = True
            self.result.stopped = f"interrupted after {self.done} of {self.total} pairs; {len(pending)} not analysed"
            return
        finally:
            self._release(futures)
            seen = started_with | set(self.by_worker) | set(_worker_addresses(client))
            still = set(_worker_addresses(client))
            self.result.workers = [
                {"address": w, "pairs": self.by_worker.get(w, 0), "lost": bool(still) and w not in still}
                for w in sorted(seen)
            ]

    def _cluster_lost(self, client: Client) -> str | None:
        """Why the campaign cannot go on: the client has been without its scheduler, or the
        scheduler without a worker, for longer than their grace periods; None while it can.
        The client's own state tells a lost scheduler (it turns from "running" to "connecting"
        at once, its futures to "cancelled"); a future "lost" with a dead worker is not one: it
        is computed again, however long that takes."""
        now = time.monotonic()
        if client.status != "running":
            if self.lost_since is None:
                self.lost_since = now
            return "the scheduler went away" if now - self.lost_since > SCHEDULER_GRACE_S else None
        self.lost_since = None
        if _worker_addresses(client):
            self.workerless_since = None
            return None
        if self.workerless_since is None:
            self.workerless_since = now
        if now - self.workerless_since > WORKERLESS_GRACE_S:
            return f"no worker on the cluster for {WORKERLESS_GRACE_S:.0f} s"
        return None

    @staticmethod
    def _release(futures: dict[Future[PairOutcome], Pair]) -> None:
        for fut in futures:
            try:
                fut.release()
            except Exception:  # noqa: BLE001 - a client without its scheduler has nothing to release
                pass

    def _collect(self, fut: Future[PairOutcome], pair: Pair) -> bool:
        """Store a pair `wait` returned as done; False when it is not done any more: a worker
        that held its result died since (the future is "lost", then computed again)."""
        if fut.status == "finished":
            try:
                outcome = fut.result(timeout=SCHEDULER_GRACE_S)
            except TimeoutError:
                # Its worker died after `wait` returned and the pair is being computed again
                # (or the scheduler is gone: `_cluster_lost` tells, from the client's state).
                # Caught here because a TimeoutError is an OSError, which the caller reads as
                # "no scheduler".
                return False
            self.collected.add(fut.key)
            self.store_outcome(pair, outcome)
        elif fut.status == "error":
            # KilledWorker: the pair took down every worker it was given (Dask retries up to
            # distributed.scheduler.allowed-failures times); anything else is a bug in a worker.
            exc = fut.exception(timeout=SCHEDULER_GRACE_S)
            self.collected.add(fut.key)
            self.store_error(pair, f"{type(exc).__name__}: {exc}")
        else:
            return False
        return True


def run_campaign(
    db: DbPath,
    pairs: list[Pair],
    options: CampaignOptions,
    on_progress: ProgressCallback | None = None,
) -> CampaignResult:
    """Analyse every complete pair not stored yet on the cluster at `options.scheduler` (None:
    a local cluster of this machine's cores) and store it; incomplete pairs are failures.
    Returns what `campaign analyze --json` prints."""
    with open_store(db) as s:
        return _run(s, pairs, options, on_progress)


def _run(s: Store, pairs: list[Pair], options: CampaignOptions, on_progress: ProgressCallback | None) -> CampaignResult:
    campaign_id = stored.open_campaign(s, campaign_key(options), options.source, options.analysis)
    already = stored.stored_pairs(s, [p.key for p in pairs])
    campaign = _Campaign(s, campaign_id, options, on_progress)
    todo = []
    for pair in pairs:
        if pair.key in already:
            known = already[pair.key]
            campaign.result.pairs.append(_pair_entry(pair, known["analysis_id"], known["worker"], known, resumed=True))
        elif not pair.complete:
            missing = "POST" if pair.post is None else "PRE"
            campaign.store_error(pair, f"no {missing} capture for {pair.pre or pair.post}")
        else:
            todo.append(pair)
    campaign.total = campaign.done = len(pairs) - len(todo)
    if todo:
        client = _connect(options.scheduler)
        try:
            campaign.run(client, todo)
        finally:
            _close(client)
    result = campaign.result
    result.pairs.sort(key=lambda p: p["name"])
    result.failed.sort(key=lambda p: p["name"])
    status = "interrupted" if result.stopped else "partial" if result.partial else "finished"
    stored.finish_campaign(s, campaign_id, status)
    return result
