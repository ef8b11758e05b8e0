"""A run's stored explanation (`lowtail explain`, stored by the run's sweep or the command)
as a section of a page (the experiment's, and the explanation's own: explain/page.py):
what could not be seen first, then the causes of its tail ranked, each with its evidence and
remedy, the unexplained share, the interrupts at their sampling resolution; and the headline,
once per page, when the host could not measure what was asked. Read from the store (or the
document the command just worked out): nothing is worked out here, every share is the stored
number."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lowtail.core.terminal import shown
from lowtail.core.units import format_ns, format_percent
from lowtail.explain.asked import tail_words
from lowtail.explain.words import KIND_WORDS, core_text, rates_lines, runs_headline
from lowtail.report.page import Page, esc, table_html
from lowtail.store.db import Store
from lowtail.store.explain import explanation, headlines

EVIDENCE_SHOWN = 3
# Runs whose headline a page's banner repeats; the others are counted.
BANNER_RUNS = 3


def headline_banner(page: Page, store: Store, run_ids: Iterable[int]) -> None:
    """Said first, once: the host could not measure what was asked in these runs — each kind of
    artefact once with the share of each run's tail it explains, the remedies once (it read
    as each run's whole headline one after another)."""
    said = headlines(store, run_ids)
    if not said:
        return
    causes = {r: list(doc["causes"]) for r in sorted(said) if (doc := explanation(store, r)) is not None}
    text = runs_headline(causes)
    if text is None:  # explanations stored by an older version: their own words
        runs = sorted(said)
        text = " ".join(f"Run {r}: {said[r]}" for r in runs[:BANNER_RUNS])
        text += (
            f" (and runs {', '.join(map(str, runs[BANNER_RUNS:]))}: see their causes)"
            if len(runs) > BANNER_RUNS
            else ""
        )
    page.banner(shown(text), "warn")


def explain_section(
    page: Page,
    store: Store,
    run_id: int,
    heading: str | None = None,
    level: int = 3,
    doc: Mapping[str, Any] | None = None,
    unseen: bool = True,
) -> None:
    """The stored explanation of a run (or `doc`, one just worked out), what could not be seen
    first (unless the page already leads with it); where there is none, the command that makes it."""
    title = heading or f"Run {run_id}: causes of the tail"
    doc = doc if doc is not None else explanation(store, run_id)
    if doc is None:
        page.add(
            title,
            f"<p class='meta'>Not explained yet: <code>lowtail explain {run_id}</code> works it out.</p>",
            level,
        )
        return
    tail = doc["tail"]
    head = (
        f"<p class='meta'>{tail['packets']:,} tail packets, {esc(tail_words(tail['rule'], tail['threshold_ns']))}; "
        f"unexplained: {esc(format_percent(doc['unexplained_share']))} "
        f"of them. Trace: {esc(_trace_text(doc.get('trace') or {}))}.</p>"
    )
    causes = doc.get("causes") or []
    head = (unseen_html(doc) if unseen else "") + head
    if not causes:
        body = "<p>No cause explains more of the tail than chance would.</p>"
    else:
        body = table_html(
            ["#", "cause", "role", "CPU", "share of tail", "added", "what ran", "remedy", "source"],
            [
                [
                    i,
                    KIND_WORDS.get(c["kind"], c["kind"]),
                    c["role"],
                    core_text(c, doc),
                    format_percent(c["share"]),
                    format_ns(c["added_ns"]),
                    shown(c["evidence"].get("what", "")),
                    c["remedy"]["action"],
                    c["remedy"]["source"],
                ]
                for i, c in enumerate(causes, 1)
            ],
            text=(1, 2, 6, 7, 8),
        )
        body += _evidence_table(causes)
    body += _sampled_html(doc)
    notes = "".join(f"<p class='meta'>{esc(shown(n))}</p>" for n in doc.get("notes") or [])
    page.add(title, head + body + notes, level)


def unseen_html(doc: Mapping[str, Any]) -> str:
    """What the explanation could not see, first: each thing, the share of the tail it could
    hold, its resolution where it has one."""
    unseen = doc.get("unseen") or []
    if not unseen:
        return ""
    rows = [
        [
            u["kind"].replace("_", " "),
            shown(u["what"]),
            format_percent(u["share"]),
            u.get("resolution") or "",
        ]
        for u in unseen
    ]
    return "<h4>What explain could not see</h4>" + table_html(
        ["what", "in detail", "share of the tail it could hold", "resolution"], rows, text=(1, 3)
    )


def _sampled_html(doc: Mapping[str, Any]) -> str:
    """The interrupts at their sampling resolution: rates per CPU and their correlation with
    the tail period by period."""
    out = ""
    for s in doc.get("interrupts") or []:
        rows = [
            [
                c["cpu"],
                shown(c["kind"]),
                "–" if c["r"] is None else f"{c['r']:.2f}",
                "–" if c["p"] is None else f"{c['p']:.3g}",
                "yes" if c["significant"] else "no",
            ]
            for c in s.get("correlation") or []
        ]
        out += (
            f"<h4>{esc(s['source'].capitalize())} interrupts at their resolution</h4>"
            f"<p class='meta'>{esc(s['resolution'])}.</p>"
            + "".join(f"<p>{esc(shown(line))}</p>" for line in rates_lines(s))
            + "".join(f"<p>{esc(shown(line))}</p>" for line in s.get("sentences") or [])
        )
        if rows:
            out += table_html(
                ["CPU", "kind", "r with the tail per period", "p (circular shifts)", "beyond chance"], rows, text=(1,)
            )
    return out


def _evidence_table(causes: list[Any]) -> str:
    """The first few tail packets of each cause beside what ran while they were in flight."""
    rows = []
    for i, c in enumerate(causes, 1):
        for e in (c["evidence"].get("events") or [])[:EVIDENCE_SHOWN]:
            event: Mapping[str, Any] = e.get("event") or {}
            rows.append(
                [
                    i,
                    e["packet_id"],
                    format_ns(e["latency_ns"]),
                    format_ns(e["delay_ns"]),
                    shown(event.get("what", "")),
                    format_ns(event["duration_ns"]) if "duration_ns" in event else "",
                ]
            )
    if not rows:
        return ""
    return "<h4>Evidence</h4>" + table_html(
        ["#", "packet", "latency", "delay explained", "what ran", "for"], rows, text=(4,)
    )


def _trace_text(trace: Mapping[str, Any]) -> str:
    method = trace.get("method", "none")
    untraced = [u for u in trace.get("untraced") or [] if isinstance(u, dict)]
    missing = "".join(
        f"; not traced: the {u['role']}{' on ' + u['host'] if u['host'] else ''} ({u['reason']})" for u in untraced
    )
    if method == "tracefs":
        hosts = [h["host"] for h in trace.get("hosts") or []]
        where = f" of {', '.join(hosts)}" if any(not h.get("local", True) for h in trace.get("hosts") or []) else ""
        return f"kernel tracepoints on the roles' cores{where}{missing}"
    return f"none ({trace.get('reason') or 'the run was recorded without one'})"
