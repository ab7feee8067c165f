"""Per-rank work on a Dask cluster (``distributed``, the ``dask`` extra) when one machine is not enough.

Each rank file is one task: the worker reads the file itself (a path its machine sees, or a URL), reduces it
to its summary and sends that back; the client's ``concurrent.futures`` executor hands the results to the
trace loader as they finish. The workers need gpuscope (the same version) and, for URLs, the filesystem
library and credentials for them in their own environment. How long to try to reach the scheduler is Dask's own
setting (``distributed.comm.timeouts.connect``, 30 s unless configured: ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT``).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any

from gpuscope.api.errors import GpuscopeError
from gpuscope.model.errors import AnalysisError
from gpuscope.store import StoreError
from gpuscope.traces import TraceError


@contextmanager
def dask_executor(cluster: str | Any) -> Iterator[Executor]:
    """An executor on the Dask cluster ``cluster`` names: a scheduler address (``tcp://host:8786``), or a
    ``distributed.Client`` already connected (left open). Failures of the cluster itself (no scheduler there,
    workers without gpuscope, a lost worker) end as one GpuscopeError line."""
    own = isinstance(cluster, str)
    where = cluster if own else str(getattr(getattr(cluster, "scheduler", None), "address", "the given client"))
    try:
        from distributed import Client
    except ImportError as exc:
        raise GpuscopeError("running on Dask needs the dask extra: pip install 'gpuscope[dask]'") from exc
    client: Any = cluster
    if own:
        try:
            _probe(cluster)
            client = Client(cluster, set_as_default=False)  # type: ignore[no-untyped-call]
        except (OSError, TimeoutError, ValueError) as exc:
            raise GpuscopeError(f"cannot reach the Dask scheduler at {where}: {_line(exc)}") from exc
    try:
        yield client.get_executor(pure=False)
    except (GpuscopeError, TraceError, AnalysisError, StoreError, SystemExit, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - what a worker or the scheduler raised, as the one line it is
        raise GpuscopeError(f"on the Dask cluster at {where}: {_line(exc)}") from exc
    finally:
        if own:
            client.close()


def _probe(address: str) -> None:
    """Connect to the scheduler once before a Client does: a Client that fails to start leaves a half-built
    object whose clean-up blocks the interpreter's exit for most of a minute."""
    import asyncio  # here: asyncio alone costs a local analysis tens of ms to import

    from distributed.comm.core import connect

    async def reach() -> None:
        comm = await connect(address)  # type: ignore[no-untyped-call]
        await comm.close()

    asyncio.run(reach())


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
