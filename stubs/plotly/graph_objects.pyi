# plotly's figures are property bags: traces and layouts take their many keywords as plotly
# documents them (validated by plotly at run time), so they are typed `Any` here.
from typing import Any

class BaseTraceType:
    showlegend: bool | None
    def __init__(self, arg: Any = None, **kwargs: Any) -> None: ...

class _Axis:
    plotly_name: str

class _SubplotRef:
    xaxis: _Axis
    yaxis: _Axis

class Scatter(BaseTraceType): ...
class Bar(BaseTraceType): ...

class Figure:
    layout: Any
    data: tuple[BaseTraceType, ...]
    def __init__(
        self, data: Any = None, layout: Any = None, frames: Any = None, skip_invalid: bool = False
    ) -> None: ...
    def add_trace(
        self, trace: BaseTraceType | dict[str, Any], row: int | None = None, col: int | None = None, **kwargs: Any
    ) -> Figure: ...
    def add_shape(self, arg: Any = None, row: int | None = None, col: int | None = None, **kwargs: Any) -> Figure: ...
    def add_annotation(
        self, arg: Any = None, row: int | None = None, col: int | None = None, **kwargs: Any
    ) -> Figure: ...
    def update_layout(self, dict1: Any = None, overwrite: bool = False, **kwargs: Any) -> Figure: ...
    def update_xaxes(
        self, patch: Any = None, row: int | None = None, col: int | None = None, **kwargs: Any
    ) -> Figure: ...
    def update_yaxes(
        self, patch: Any = None, row: int | None = None, col: int | None = None, **kwargs: Any
    ) -> Figure: ...
    def to_plotly_json(self) -> dict[str, Any]: ...
    def get_subplot(self, row: int, col: int) -> _SubplotRef: ...
