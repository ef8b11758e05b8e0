# The part of dask.distributed a campaign uses: a client of a scheduler (or of a local
# cluster), tasks submitted as futures, waited on, collected and released.
from collections.abc import Callable, Iterable
from typing import Any, Generic, Literal, NamedTuple, TypeVar

_T = TypeVar("_T")

class Future(Generic[_T]):
    key: str
    @property
    def status(self) -> str: ...
    def result(self, timeout: float | None = None) -> _T: ...
    def exception(self, timeout: float | None = None) -> BaseException | None: ...
    def release(self) -> None: ...

class LocalCluster:
    def __init__(
        self,
        n_workers: int | None = None,
        threads_per_worker: int | None = None,
        processes: bool | None = None,
        dashboard_address: str | None = ":8787",
        silence_logs: int | bool = ...,
        **kwargs: Any,
    ) -> None: ...
    def close(self, timeout: float | None = None) -> None: ...

class Client:
    cluster: LocalCluster | None
    @property
    def status(self) -> str: ...
    def __init__(
        self, address: str | LocalCluster | None = None, timeout: str | float = ..., **kwargs: Any
    ) -> None: ...
    def submit(self, func: Callable[..., _T], *args: Any, key: str | None = None, pure: bool = True) -> Future[_T]: ...
    def scheduler_info(self, n_workers: int = 5) -> dict[str, Any]: ...
    def close(self, timeout: float | None = None) -> None: ...

class DoneAndNotDoneFutures(NamedTuple, Generic[_T]):
    done: set[Future[_T]]
    not_done: set[Future[_T]]

def wait(
    fs: Iterable[Future[_T]],
    timeout: float | None = None,
    return_when: Literal["ALL_COMPLETED", "FIRST_COMPLETED"] = "ALL_COMPLETED",
) -> DoneAndNotDoneFutures[_T]: ...

class Worker:
    @property
    def address(self) -> str: ...

def get_worker() -> Worker: ...
