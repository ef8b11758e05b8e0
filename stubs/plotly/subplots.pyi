from collections.abc import Sequence
from typing import Any

from plotly.graph_objects import Figure

def make_subplots(
    rows: int = 1,
    cols: int = 1,
    shared_xaxes: bool | str = False,
    shared_yaxes: bool | str = False,
    subplot_titles: Sequence[str] | None = None,
    **kwargs: Any,
) -> Figure: ...
