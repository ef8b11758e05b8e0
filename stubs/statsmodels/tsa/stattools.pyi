from typing import Any

from numpy.typing import ArrayLike

# Both return a tuple whose second item is the test's p-value (the rest differs by options).
def adfuller(
    x: ArrayLike,
    maxlag: int | None = None,
    regression: str = "c",
    autolag: str | None = "AIC",
    store: bool = False,
    regresults: bool = False,
) -> tuple[Any, ...]: ...
def kpss(x: ArrayLike, regression: str = "c", nlags: str | int = "auto", store: bool = False) -> tuple[Any, ...]: ...
