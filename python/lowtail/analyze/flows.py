"""Per-flow figures of an analysis: the flow key a user names, the check that the flows add
up to the pooled figures, the flows as printed (worst first, with how far they lie apart:
`analyze/document.py` ranks them, where the pages read it too).

The native analysis tells PRE's flows apart by their headers (`--flow-key`: the 5-tuple by
default, the UDP source port, or none) and gives each flow its packets and its exact
latency figures; everything here reads those figures (from the analysis document or the
store), never the packets."""

from __future__ import annotations

from lowtail import _native
from lowtail.analyze.document import AnalysisDocument, FlowsDocument, flow_spread, flows_worst_first
from lowtail.core.errors import UserError

# The keys that tell flows apart, the default first: the native analysis owns them.
FLOW_KEYS: tuple[str, ...] = tuple(_native.FLOW_KEYS)
DEFAULT_FLOW_KEY = FLOW_KEYS[0]

# How many of the worst flows the terminal lists.
SHOWN_FLOWS = 5


def parse_flow_key(text: str) -> str:
    """The flow key `--flow-key` names ("5tuple", "src-port", "none"; case and surrounding
    spaces do not matter); a UserError naming the choices for anything else."""
    name = text.strip().lower()
    if name not in FLOW_KEYS:
        shown = text.encode("unicode_escape").decode("ascii")[:40]
        raise UserError(f"--flow-key {shown!r}: one of {', '.join(FLOW_KEYS)}")
    return name


def sums_disagree(doc: AnalysisDocument) -> str | None:
    """What of the flows does not add up to the pooled figures (sent, received, lost,
    negative, samples), or None when everything does (as it must: a flow is a partition of
    the packets)."""
    flows = doc.get("flows")
    if not flows:
        return None
    wrong = []
    for name in ("sent", "received", "lost", "negative"):
        total = sum(int(f[name]) for f in flows["flows"])
        if total != doc[name]:
            wrong.append(f"{name} {total:,} ≠ {doc[name]:,}")
    pooled = (doc.get("latency_ns") or {}).get("samples") or 0
    samples = sum(int((f["latency_ns"] or {}).get("samples") or 0) for f in flows["flows"])
    if samples != pooled:
        wrong.append(f"samples {samples:,} ≠ {pooled:,}")
    return "; ".join(wrong) or None


def with_spread(doc: AnalysisDocument) -> AnalysisDocument:
    """The document with its flows' spread added (`flow_spread`), when it has flows."""
    flows = doc.get("flows")
    if flows and flows["flows"]:
        doc["flow_spread"] = flow_spread(flows["flows"])
    return doc


def for_printing(flows: FlowsDocument) -> FlowsDocument:
    """The flows as `--json` prints them: worst first."""
    return {**flows, "flows": flows_worst_first(flows["flows"])}
