"""A self-contained HTML page: one file is the whole report and works offline. Its
figures are plotly figures embedded as JSON and drawn by plotly's JavaScript bundle, which
is inlined once per page (no CDN) gzip-compressed and base64-encoded (1.96 MB instead of
4.8 MB: plotly's Python package ships only the full bundle, and there is no npm here for a
partial one) and unpacked by the browser's own DecompressionStream before the figures are
drawn; a table of contents links its sections; banners above
it say what a reader must know before reading on (an emulator's latencies, partial data)."""

from __future__ import annotations

import base64
import gzip
import html
import itertools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from lowtail.core.files import write_result
from lowtail.core.version import __version__

if TYPE_CHECKING:
    import plotly.graph_objects as go

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 1.5em auto; max-width: 1480px;
       color: #1d1d1f; line-height: 1.45; padding: 0 1.2em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: .6em 0; font-variant-numeric: tabular-nums; font-size: .92em; }
th, td { padding: .25em .55em; text-align: right; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #fafafa; }
th:first-child, td:first-child { text-align: left; }
td.text, th.text { text-align: left; } td.fig { white-space: nowrap; }
table.facts td { text-align: left; }
.meta { color: #666; font-size: .9em; } .warn { color: #9a6700; font-weight: 600; }
.fail { color: #b42318; font-weight: 600; } .pass { color: #067647; font-weight: 600; }
figure { margin: 1em 0; } figcaption { color: #555; font-size: .9em; }
code { background: #f4f4f4; padding: 0 .2em; }
.banner { border-left: 5px solid #b42318; background: #fdf0ef; padding: .6em 1em; margin: .8em 0; font-weight: 600; }
.banner.warn { border-color: #9a6700; background: #fff8e6; color: #5c3d00; }
nav.toc { background: #f7f7f8; border: 1px solid #e5e5e5; padding: .5em 1.2em; margin: 1em 0; font-size: .92em; }
nav.toc ul { margin: .3em 0; padding-left: 1.2em; columns: 2; column-gap: 2.5em; }
nav.toc li { break-inside: avoid; } nav.toc li.toc-3 { margin-left: 1.4em; list-style: circle; }
.wide { overflow-x: auto; }
.lt-plot-area { width: 100%; }
.side-by-side { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1em; }
"""

# The one renderer of every figure of a page: plotly's bundle unpacked (gzip, base64) and
# run, then each embedded spec drawn into its div.
_RENDER = """
(async function () {
  var packed = document.getElementById('lt-plotly').textContent;
  var bytes = Uint8Array.from(atob(packed), function (c) { return c.charCodeAt(0); });
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  var code = document.createElement('script');
  code.text = await new Response(stream).text();
  document.head.appendChild(code);
  var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ['select2d', 'lasso2d']};
  document.querySelectorAll('script.lt-plot-spec').forEach(function (s) {
    var spec = JSON.parse(s.textContent);
    Plotly.newPlot(document.getElementById(s.dataset.target), spec.data, spec.layout, config);
  });
})();
"""

_PLOT_MARK = "lt-plot-spec"
_plot_ids = itertools.count(1)


def esc(text: object) -> str:
    """Text made safe to put in HTML."""
    return html.escape(str(text))


def breakable(text: object) -> str:
    """Text made safe to put in HTML that may wrap after "_" and "=" too: a DuT's options
    ("memory_reservation=256") in a narrow column, which pushed a table past the window."""
    return esc(text).replace("_", "_<wbr>").replace("=", "=<wbr>")


@cache
def plotly_bundle() -> str:
    """plotly's JavaScript bundle as the Python package ships it, gzip-compressed and
    base64-encoded for a page to carry (made once per process: about half a second)."""
    from plotly.offline import get_plotlyjs

    packed = gzip.compress(str(get_plotlyjs()).encode(), compresslevel=9, mtime=0)
    return base64.b64encode(packed).decode("ascii")


# Strings plotly draws as its own markup on purpose: the hover templates ("<extra>").
_MARKUP_KEYS = frozenset({"hovertemplate", "texttemplate"})


def _as_text(spec: object, key: str = "") -> object:
    """A figure's strings as plain text: plotly draws <b>, <br>, <a href> … in titles, legend
    entries and labels, so a DuT named "<b>fw</b>" would be drawn bold. Entities (&lt;) are
    what plotly shows as the characters; its own hover templates keep their markup."""
    if isinstance(spec, str):
        return spec if key in _MARKUP_KEYS else html.escape(spec, quote=False)
    if isinstance(spec, dict):
        return {k: _as_text(v, k) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_as_text(v, key) for v in spec]
    return spec


def figure_html(fig: go.Figure, caption: str = "") -> str:
    """A plotly figure embedded in the page: a div, its JSON (every string drawn as plain
    text), and a caption."""
    import plotly.io as pio

    n = next(_plot_ids)
    spec = pio.to_json(_as_text(fig.to_plotly_json()), validate=False).replace("</", "<\\/")
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return (
        f"<figure><div class='lt-plot-area' id='lt-plot-{n}'></div>"
        f"<script type='application/json' class='{_PLOT_MARK}' data-target='lt-plot-{n}'>{spec}</script>{cap}</figure>"
    )


@dataclass(frozen=True)
class Cell:
    """A table cell with a CSS class ("pass", "fail", "text" …) and a hover title; `html`
    True when the text is markup built by the report itself."""

    text: object
    css: str = ""
    html: bool = False
    title: str = ""  # shown on hover
    span: int = 1  # columns it spans (a row of its own under a table's row: the reason of a verdict)

    def render(self) -> str:
        """The <td> of this cell."""
        body = str(self.text) if self.html else esc(self.text)
        attrs = (
            (f" class='{self.css}'" if self.css else "")
            + (f" title='{esc(self.title)}'" if self.title else "")
            + (f" colspan='{self.span}'" if self.span > 1 else "")
        )
        return f"<td{attrs}>{body}</td>"


def table_html(
    header: Sequence[object], rows: Sequence[Sequence[object]], css: str = "", text: Collection[int] = ()
) -> str:
    """An HTML table of a header and rows; a cell (or heading) is text (escaped) or a `Cell`.
    Columns are figures, right-aligned, but the first; `text` names the other columns of
    prose, left-aligned (a remedy of five lines read ragged on the left). Where it names
    them, the figures beside the prose keep number and unit on one line ("13.6 %" broke
    into "13.6" over "%" as the prose took the width)."""

    def plain(cell: object, column: int, tag: str) -> str:
        css = "text" if column in text else "fig" if text and column > 0 and tag == "td" else ""
        return f"<{tag} class='{css}'>{esc(cell)}</{tag}>" if css else f"<{tag}>{esc(cell)}</{tag}>"

    head = "".join(
        f"<th class='{h.css}'>{h.text if h.html else esc(h.text)}</th>" if isinstance(h, Cell) else plain(h, i, "th")
        for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>" + "".join(c.render() if isinstance(c, Cell) else plain(c, i, "td") for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    cls = f" class='{css}'" if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def anchor(heading: str) -> str:
    """The id a heading is linked by: "run-3-fwd-10-kpps"."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "section"


@dataclass
class Section:
    heading: str
    body: str
    level: int = 2
    id: str = ""


@dataclass
class Page:
    """A report page: title, banners, sections (each linked from the table of contents)."""

    title: str
    subtitle: str = ""
    sections: list[Section] = field(default_factory=list)
    banners: list[tuple[str, str]] = field(default_factory=list)
    lead_html: str = ""  # the answer, first under the title: the verdict cards

    def lead(self, html: str) -> None:
        """What the page opens with, above problems and contents (markup built by the
        report itself: `report/cards.py`)."""
        self.lead_html += html

    def add(self, heading: str, body_html: str, level: int = 2) -> str:
        """Append a section (level 2, or 3 under the last one); returns its anchor."""
        base, taken = anchor(heading), {s.id for s in self.sections}
        ident = base
        for i in itertools.count(2):
            if ident not in taken:
                break
            ident = f"{base}-{i}"
        self.sections.append(Section(heading, body_html, level, ident))
        return ident

    def banner(self, text: str, css: str = "") -> None:
        """A message above everything else ("warn" for a warning, else an alarm); escaped."""
        self.banners.append((esc(text), css))

    def _toc(self) -> str:
        """Links to every section (level-3 ones indented under theirs)."""
        if len(self.sections) < 2:
            return ""
        items = "".join(f"<li class='toc-{s.level}'><a href='#{s.id}'>{esc(s.heading)}</a></li>" for s in self.sections)
        return f"<nav class='toc'><b>Contents</b><ul>{items}</ul></nav>"

    def render(self) -> str:
        """The page as one HTML document."""
        made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        body = "".join(f"<h{s.level} id='{s.id}'>{esc(s.heading)}</h{s.level}>{s.body}" for s in self.sections)
        has_plots = _PLOT_MARK in body
        head_script = f"<script type='application/gzip' id='lt-plotly'>{plotly_bundle()}</script>" if has_plots else ""
        banners = "".join(f"<div class='banner {css}'>{text}</div>" for text, css in self.banners)
        return (
            f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(self.title)}</title>"
            f"<style>{_STYLE}</style>{head_script}</head><body><h1>{esc(self.title)}</h1>"
            f"<p class='meta'>{esc(self.subtitle)} · lowtail {esc(__version__)} · {made}</p>"
            f"{self.lead_html}{banners}{self._toc()}{body}"
            + (f"<script>{_RENDER}</script>" if has_plots else "")
            + "</body></html>"
        )

    def write(self, path: Path) -> Path:
        """Write the page to `path` whole (see `files.write_atomically`: the directory
        must exist)."""
        html = self.render()
        return write_result(path, html, "report")
