"""A self-contained HTML page: figures are embedded, so one file is the whole report."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from lowtail import __version__
from lowtail.files import write_result

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #1d1d1f; line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; font-variant-numeric: tabular-nums; }
th, td { padding: .25em .7em; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; }
.meta { color: #666; font-size: .9em; } .warn { color: #9a6700; } .fail { color: #b42318; font-weight: 600; }
.pass { color: #067647; font-weight: 600; } figure { margin: 1em 0; } img { max-width: 100%; }
figcaption { color: #555; font-size: .9em; } code { background: #f4f4f4; padding: 0 .2em; }
"""


def esc(text: object) -> str:
    """Text made safe to put in HTML."""
    return html.escape(str(text))


def figure_html(fig, caption: str = "") -> str:
    """Render a matplotlib figure as an embedded PNG."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">{cap}</figure>'


def table_html(header: list[str], rows: list[list[object]]) -> str:
    """An HTML table of a header and rows (every cell escaped)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass
class Page:
    title: str
    subtitle: str = ""
    sections: list[tuple[str, str]] = field(default_factory=list)

    def add(self, heading: str, body_html: str) -> None:
        self.sections.append((heading, body_html))

    def render(self) -> str:
        made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        parts = [
            f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(self.title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{esc(self.title)}</h1>"
            f"<p class='meta'>{esc(self.subtitle)} · lowtail {esc(__version__)} · {made}</p>"
        ]
        for heading, body in self.sections:
            parts.append(f"<h2>{esc(heading)}</h2>{body}")
        parts.append("</body></html>")
        return "".join(parts)

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_result(path, self.render(), "report")
