"""What a streamed fit reads (issue 36): its sources, each opened once per pass.

A fit of ``polars_gbt.train`` reads its training rows twice (pass 1: cut points, categories
and an order-free digest of the per-row inputs; pass 2: bins, each batch's labels, weights
and query ids kept beside its bins) and each evaluation set once, in batches, so that no
float column ever exists whole. The passes may give the rows in different orders (an
unordered join on Polars' streaming engine): a row's label is always read with its features.
A source gives the batches of one pass each time it is
opened, as Polars ``Series`` laid out as ``gbt.fit``'s inputs (the fit's expressions selected
from each batch), and says how many rows it has when it knows without reading them.

Sources (``source``):

* a ``pl.LazyFrame``: a scan of Parquet or IPC files whose slices reach the files (projections
  and row-wise expressions over one scan) is read one slice at a time, each slice a query of
  its own (only its rows are decoded, and only one slice is in memory); any other query
  through Polars' streaming engine (``sink_batches``), at most one batch ahead;
* a ``pyarrow.dataset.Dataset``: its scanner's batches, only the columns the fit reads;
* a callable taking no arguments that returns a fresh Arrow stream (an object with
  ``__arrow_c_stream__``, such as a ``pyarrow.RecordBatchReader``) each time;
* an in-memory frame (``pl.DataFrame``, pyarrow ``Table`` / ``RecordBatch``, pandas): one
  batch, its columns as they are.

A one-shot stream (a ``RecordBatchReader``, or any other object with ``__arrow_c_stream__``
that is not an in-memory table) can be read only once: it may be an evaluation set, which
is read once, but not the training data, which is read twice.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl

from polars_gbt._errors import DataError

# At least this many bytes of decoded columns in each batch a fit reads from a source it cuts
# into batches itself (slices of a scan, a pyarrow dataset's batches), and a 16th of all the
# columns up to sixteen times as much: small beside the fit's own state (48 bytes a row: 137
# MiB at 3M rows), large enough that each batch's query (~35 ms: its plan and the files'
# footers) and the pages it decompresses beyond its rows cost little beside its decoding. One
# pass over 20M x 29 float32 columns in 20 files on 16 cores: 2.59 s in 64 slices, 1.61-1.89 s
# in 35, 0.73 s in 10 (of 256 MiB), against 0.47-0.64 s for one collect (docs/benchmarks.md).
BATCH_BYTES = 16 << 20

Batches = Iterator[list[pl.Series]]
Passes = Callable[[list[pl.Expr], "list[str] | None"], tuple[int | None, Callable[[], Batches]]]


class Source:
    """Rows a streamed fit reads in batches.

    ``names``: the columns. ``passes(columns, reads)``: the number of rows when known without
    reading them (None: a pass counts them) and a callable opening one pass, an iterator of
    the ``columns`` expressions' Series from each batch; ``reads`` names the columns those
    expressions read (None: any), the only ones an Arrow source need decode."""

    def __init__(self, names: list[str], passes: Passes) -> None:
        self.names = names
        self.passes = passes


def is_streamed(data: Any) -> bool:
    """Whether ``data`` is a source that streams (a lazy query, a pyarrow dataset, a callable
    giving fresh Arrow streams, a one-shot Arrow stream), not rows in memory."""
    return isinstance(data, pl.LazyFrame) or _is_dataset(data) or is_one_shot(data) or (
        callable(data) and not _in_memory(data)
    )


def source(data: Any, what: str) -> Source:
    """``data`` as a source; ``what`` names it in errors (``data``, ``eval set `valid```)."""
    if isinstance(data, pl.LazyFrame):
        return _lazy_source(data)
    if _is_dataset(data):
        return _dataset_source(data)
    if is_one_shot(data):
        return _one_shot_source(data, what)
    if _in_memory(data):
        frame = data if isinstance(data, pl.DataFrame) else pl.DataFrame(data)
        return _frame_source(frame)
    if callable(data):
        return _callable_source(data, what)
    if isinstance(data, Iterator):
        raise DataError(
            f"{what} is a one-shot iterator of batches, which a fit cannot tell the columns of before reading it: "
            "pass a pl.LazyFrame (pl.scan_parquet(...)), a pyarrow.dataset.Dataset, a callable returning a fresh "
            "Arrow stream each time it is called, or a collected frame (an evaluation set may also be a "
            "pyarrow.RecordBatchReader: it is read once)"
        )
    return _frame_source(pl.DataFrame(data))


def one_shot_error(data: Any, what: str) -> DataError:
    """The error of a one-shot stream given as training data, which a streamed fit reads twice."""
    kind = type(data).__name__
    return DataError(
        f"{what} is a one-shot stream ({kind}): a streamed fit reads its training data twice (cut points, then "
        "bins), and a stream can be read only once. Pass a source that can be opened again: a pl.LazyFrame "
        "(pl.scan_parquet(...)), a pyarrow.dataset.Dataset (pyarrow.dataset.dataset(paths)), or a callable that "
        f"returns a fresh stream each time it is called (lambda: open_reader()); or collect it first "
        f"(pl.DataFrame({what}))"
    )


def collected(data: Any) -> pl.LazyFrame:
    """``data`` for a fit that collects its rows (continued training, frames beside no
    streamed source): a LazyFrame over them, collected where it runs."""
    if isinstance(data, pl.LazyFrame):
        return data
    if _is_dataset(data):
        return pl.scan_pyarrow_dataset(data)
    if isinstance(data, pl.DataFrame):
        return data.lazy()
    if callable(data) and not _in_memory(data) and not is_one_shot(data):
        return pl.DataFrame(_open_arrow(data, "data")).lazy()
    if isinstance(data, Iterator) and not hasattr(data, "__arrow_c_stream__"):
        raise DataError(
            "polars_gbt.train was given a one-shot iterator of batches: pass a pl.LazyFrame, a "
            "pyarrow.dataset.Dataset, an Arrow stream (a pyarrow.RecordBatchReader), a callable returning a fresh "
            "one each time, or a collected frame"
        )
    return pl.DataFrame(data).lazy()


def _is_dataset(data: Any) -> bool:
    if not type(data).__module__.startswith("pyarrow"):
        return False
    import pyarrow.dataset as ds

    return isinstance(data, ds.Dataset)


def _in_memory(data: Any) -> bool:
    """Rows held in memory: Polars frames, pyarrow tables, record batches and arrays,
    pandas frames, and anything with ``__arrow_c_array__`` (one in-memory batch)."""
    if isinstance(data, (pl.DataFrame, pl.Series)) or hasattr(data, "__arrow_c_array__"):
        return True
    module = type(data).__module__
    if module.startswith("pyarrow"):
        import pyarrow as pa

        return isinstance(data, (pa.Table, pa.RecordBatch, pa.ChunkedArray, pa.Array))
    return module.startswith("pandas") and type(data).__name__ == "DataFrame"


def is_one_shot(data: Any) -> bool:
    """An Arrow stream that is not rows in memory: it can be read once."""
    return hasattr(data, "__arrow_c_stream__") and not _in_memory(data) and not _is_dataset(data)


def _lazy_source(frame: pl.LazyFrame) -> Source:
    def passes(columns: list[pl.Expr], reads: list[str] | None) -> tuple[int | None, Callable[[], Batches]]:
        selected = frame.select(columns)
        # Parquet and IPC scans count their rows from their metadata.
        n_rows: int = selected.select(pl.len()).collect().item()
        if _slices_reach_the_files(selected):
            rows = _batch_rows(selected.collect_schema(), n_rows)

            def open_pass() -> Batches:
                for start in range(0, n_rows, rows):
                    yield selected.slice(start, rows).collect(engine="streaming").get_columns()

        else:

            def open_pass() -> Batches:
                return (b.get_columns() for b in sink_batches(selected))

        return n_rows, open_pass

    return Source(frame.collect_schema().names(), passes)


def _slices_reach_the_files(query: pl.LazyFrame) -> bool:
    """Whether a slice of ``query`` is read from its files alone: one Parquet or IPC scan,
    below only projections and row-wise expressions, with no filter, so that the slice goes
    into the scan (Polars' optimised plan shows it as the scan's ``SLICE:``) and the scan
    decodes only the row groups the slice covers. Where this cannot be told (another plan,
    or a Polars whose plans read otherwise), False: the query streams through
    ``sink_batches``, which reads any query."""
    try:
        plan = query.slice(1, 1).explain()
    except Exception:  # noqa: BLE001 (a plan that cannot be explained streams the other way)
        return False
    lines = [line.strip() for line in plan.splitlines()]
    scans = [line for line in lines if " SCAN [" in line]
    return (
        len(scans) == 1
        and scans[0].startswith(("Parquet SCAN [", "Ipc SCAN ["))
        and any(line.startswith("SLICE: Positive") for line in lines)
        and not any(line.startswith(("SLICE[", "SELECTION:", "SLICED", "CACHE", "UNION", "JOIN")) for line in lines)
    )


def _batch_rows(schema: pl.Schema, n_rows: int | None = None) -> int:
    """Rows a batch of ``schema``'s columns takes for about ``BATCH_BYTES``, or a 16th of
    ``n_rows`` rows' bytes up to sixteen times that (4,096 to 2^21 rows)."""
    row = 0
    for dtype in schema.dtypes():
        if dtype in (pl.Boolean, pl.Int8, pl.UInt8):
            row += 1
        elif dtype in (pl.Int16, pl.UInt16):
            row += 2
        elif dtype in (pl.Int32, pl.UInt32, pl.Float32, pl.Date):
            row += 4
        elif dtype.is_numeric() or dtype.is_temporal():
            row += 8
        else:  # strings, categories, nested values: a guess
            row += 32
    target = min(max(BATCH_BYTES, (n_rows or 0) * row // 16), 16 * BATCH_BYTES)
    return min(max(target // max(row, 1), 1 << 12), 1 << 21)


def sink_batches(query: pl.LazyFrame) -> Iterator[pl.DataFrame]:
    """The batches of ``query`` from Polars' streaming engine, in order, at most one ahead of
    the consumer. ``LazyFrame.collect_batches`` (Polars 2.1) runs ahead of a slow consumer
    without bound, holding the whole result in the end; ``sink_batches`` waits for its
    callback, so it runs on a thread of its own, handing each batch over a queue of one."""
    handed: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> None:
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def produce() -> None:
        try:
            query.sink_batches(lambda df: put(df) or stop.is_set(), maintain_order=True, engine="streaming")
            put(done)
        except BaseException as e:  # handed to the consumer
            put(e)

    thread = threading.Thread(target=produce, name="polars-gbt-batches", daemon=True)
    thread.start()
    try:
        while True:
            item = handed.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            # Let go of the batch before waiting for the next: the consumer is done with it.
            del item
    finally:
        stop.set()
        thread.join()


def _roots(reads: list[str] | None, names: list[str]) -> list[str]:
    """The columns among ``names`` to decode: those in ``reads`` (None: all of them)."""
    return names if reads is None else [n for n in names if n in reads]


def _arrow_batches(batches: Iterator[Any], columns: list[pl.Expr], roots: list[str]) -> Batches:
    """Each Arrow record batch as Polars reads it (``pl.from_arrow``, as a collected table
    is read), the fit's columns selected."""
    for b in batches:
        if b.num_rows == 0:
            continue
        frame = pl.from_arrow(b.select(roots) if roots != b.schema.names else b)
        yield frame.select(columns).get_columns()


def _dataset_source(dataset: Any) -> Source:
    names = list(dataset.schema.names)

    def passes(columns: list[pl.Expr], reads: list[str] | None) -> tuple[int | None, Callable[[], Batches]]:
        roots = _roots(reads, names)
        schema = pl.from_arrow(dataset.schema.empty_table().select(roots)).select(columns).schema
        n_rows = dataset.count_rows()
        rows = _batch_rows(schema, n_rows)

        def open_pass() -> Batches:
            # One batch ahead, one file at a time: the memory of a pass is a batch or two.
            batches = dataset.to_batches(columns=roots, batch_size=rows, batch_readahead=1, fragment_readahead=1)
            return _arrow_batches(batches, columns, roots)

        return n_rows, open_pass

    return Source(names, passes)


def _open_arrow(opener: Callable[[], Any], what: str) -> Any:
    """A pyarrow RecordBatchReader over a fresh stream from ``opener``."""
    stream = opener()
    if not hasattr(stream, "__arrow_c_stream__"):
        raise DataError(
            f"the callable given as {what} returned {type(stream).__name__}, not an Arrow stream (an object with "
            "__arrow_c_stream__, such as a pyarrow RecordBatchReader or Table)"
        )
    return _reader(stream)


def _reader(stream: Any) -> Any:
    try:
        import pyarrow as pa
    except ImportError as e:
        raise DataError("reading an Arrow stream in batches needs pyarrow (pip install pyarrow)") from e
    if isinstance(stream, pa.RecordBatchReader):
        return stream
    return pa.RecordBatchReader.from_stream(stream)


def _callable_source(opener: Callable[[], Any], what: str) -> Source:
    # The schema of a stream opened and closed again: no rows are read.
    probe = _open_arrow(opener, what)
    names = list(probe.schema.names)
    probe.close()

    def passes(columns: list[pl.Expr], reads: list[str] | None) -> tuple[int | None, Callable[[], Batches]]:
        roots = _roots(reads, names)

        def open_pass() -> Batches:
            return _arrow_batches(_open_arrow(opener, what), columns, roots)

        return None, open_pass

    return Source(names, passes)


def _one_shot_source(stream: Any, what: str) -> Source:
    reader = _reader(stream)
    names = list(reader.schema.names)
    opened = []

    def passes(columns: list[pl.Expr], reads: list[str] | None) -> tuple[int | None, Callable[[], Batches]]:
        roots = _roots(reads, names)

        def open_pass() -> Batches:
            if opened:
                raise one_shot_error(stream, what)
            opened.append(True)
            return _arrow_batches(reader, columns, roots)

        return None, open_pass

    return Source(names, passes)


def _frame_source(frame: pl.DataFrame) -> Source:
    def passes(columns: list[pl.Expr], reads: list[str] | None) -> tuple[int | None, Callable[[], Batches]]:
        selected = frame.select(columns)

        def open_pass() -> Batches:
            return iter([selected.get_columns()])

        return selected.height, open_pass

    return Source(frame.columns, passes)
