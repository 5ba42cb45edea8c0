"""Training and scoring on a Dask cluster, where the data lives.

``train`` fits one model on partitions held by Dask workers: each worker that holds
partitions runs one long task on its own rows, and the workers sum their histograms
through a TCP ring of their own (a collective in the Rust core; Dask only starts the
tasks). Integer histograms sum exactly, so the model is, byte for byte, the model
``polars_gbt.train`` gives on all the partitions concatenated in order, whatever the
partitions' sizes or placement. ``predict`` scores partitions where they live.

A Polars user needs no pandas: partitions may be Dask futures or delayed objects yielding
Polars DataFrames or pyarrow Tables; a Dask DataFrame works too. Partitions that are lazy
queries (``pl.scan_parquet`` of a worker's own files, say) stream: each worker reads its own
in batches, twice (the cut points' sample, then the bins), and never holds their float columns,
as ``polars_gbt.train`` does with a ``LazyFrame``; the model is the same.

Evaluation sets and early stopping are distributed too, and GPU workers
(``device="cuda"``, one worker per GPU): they sum through NCCL on their GPUs, started over
the ring (the ring alone when some worker has no GPU or NCCL). The L1-type
objectives (``reg:absoluteerror``, ``reg:quantileerror``) refit their leaves to quantiles of
every worker's residuals, with unit or whole-number sample weights. Not yet distributed
(each a clear error): those objectives with fractional sample weights, Python objectives and
metrics, and ``init_model``.

Examples
--------
>>> from distributed import Client, LocalCluster  # doctest: +SKIP
>>> import polars as pl, polars_gbt.dask  # doctest: +SKIP
>>> client = Client(LocalCluster(n_workers=2))  # doctest: +SKIP
>>> parts = [client.scatter(pl.read_parquet(f)) for f in files]  # doctest: +SKIP
>>> model = polars_gbt.dask.train(client, parts, target="y", objective="binary:logistic")  # doctest: +SKIP
>>> scores = client.gather(polars_gbt.dask.predict(client, parts, model))  # doctest: +SKIP
"""

from __future__ import annotations

import re
import secrets
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import polars as pl

from polars_gbt import _internal
from polars_gbt._errors import DistributedError, GbtError, translated
from polars_gbt._model import Model

__all__ = ["predict", "train"]


def train(
    client: Any,
    parts: Any,
    *,
    target: str | list[str],
    features: list[str] | None = None,
    eval_sets: dict[str, Any] | None = None,
    timeout: float = 300.0,
    tracker_host: str | None = None,
    **params: Any,
) -> Model:
    """Train one model on partitions held by the workers of ``client``'s cluster.

    Parameters
    ----------
    client
        A ``distributed.Client``.
    parts
        A Dask DataFrame, or a list of Dask futures or delayed objects, each yielding a
        Polars DataFrame or a pyarrow Table (a pandas DataFrame works too), or a Polars
        LazyFrame, which the worker holding it streams. Their rows, in list order, are the
        training rows. Each stays on the worker that holds it.
    target, features, **params
        As in ``polars_gbt.train``: the label column (or several), the feature columns (all
        others when None), and the training parameters (``weight="w"`` names a column of
        the partitions). With ``device="cuda"`` each worker trains on its GPU (one worker
        per GPU, as a dask-cuda cluster starts them).
    eval_sets
        Evaluation sets by name, each given as ``parts`` is (same columns): evaluated after
        every round over all their rows, early stopping watching the last, as in
        ``polars_gbt.train``. Each part is evaluated on a training worker that holds it,
        else moved to the training worker with the fewest rows.
    timeout
        Seconds any one exchange between the workers may take, and the start-up: a worker
        that dies or stops answering is an error (``polars_gbt.DistributedError``, naming
        it) within this time, never a hang.
    tracker_host
        The address of this process that the workers can reach, for their rendezvous; by
        default the one this process reaches the scheduler from.

    Returns
    -------
    Model
        The model ``polars_gbt.train`` gives on the partitions concatenated in order.
    """
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    for name in ("eval_df", "eval_set", "init_model"):
        if name in params:
            raise ValueError(f"{name} is not supported by polars_gbt.dask.train (eval_sets= is)")
    futures = _futures(client, parts)
    sets = {name: _futures(client, p) for name, p in (eval_sets or {}).items()}
    every = futures + [f for fs in sets.values() for f in fs]
    all_lengths = client.gather(client.map(_num_rows, every, pure=False))
    holders = client.who_has(every)
    lengths = all_lengths[: len(futures)]
    # Each partition is trained on by one worker that holds it; workers in a stable order.
    owner = [sorted(holders[f.key])[0] for f in futures]
    workers = sorted({w for w, n in zip(owner, lengths) if n > 0})
    if not workers:
        raise ValueError("the partitions hold no rows")
    offsets = _offsets(lengths)
    # Evaluation parts: on a training worker that holds them, else the least loaded one.
    load = {w: sum(n for o, n in zip(owner, lengths) if o == w) for w in workers}
    evals = []
    at = len(futures)
    for name, fs in sets.items():
        ls = all_lengths[at : at + len(fs)]
        at += len(fs)
        if sum(ls) == 0:
            raise ValueError(f"eval set {name!r} has no rows")
        where = []
        for f, n in zip(fs, ls):
            held = sorted(w for w in holders[f.key] if w in load)
            where.append(held[0] if held else min(load, key=lambda w: (load[w], w)))
        evals.append((fs, ls, _offsets(ls), where))
    token = secrets.token_hex(16)
    host = tracker_host or _reachable_host(client)
    with translated():
        tracker = _internal.start_tracker(host, len(workers), token, float(timeout))
    tasks = []
    for rank, worker in enumerate(workers):
        mine = [i for i in range(len(futures)) if owner[i] == worker and lengths[i] > 0]
        eval_args, layout, eval_spans = [], [len(mine)], []
        for fs, ls, offs, where in evals:
            ours = [i for i in range(len(fs)) if where[i] == worker and ls[i] > 0]
            eval_args += [fs[i] for i in ours]
            layout.append(len(ours))
            eval_spans.append(([(offs[i], ls[i]) for i in ours], offs[-1]))
        distributed = {
            "rank": rank,
            "world": len(workers),
            "tracker": tracker,
            "token": token,
            "timeout": float(timeout),
            "spans": [(offsets[i], lengths[i]) for i in mine],
            "n_rows": offsets[-1],
            "evals": eval_spans,
        }
        tasks.append(
            client.submit(
                _fit_on_worker,
                *[futures[i] for i in mine],
                *eval_args,
                layout=layout,
                eval_names=list(sets),
                distributed=distributed,
                target=target,
                features=features,
                params=params,
                key=f"polars-gbt-fit-{token[:12]}-{rank}",
                workers=[worker],
                allow_other_workers=False,
                pure=False,
                retries=0,
            )
        )
    return Model.from_bytes(_first_result(client, tasks, workers))


def predict(client: Any, parts: Any, model: Model, **kwargs: Any) -> Any:
    """Score each partition where it lives, with ``Model.predict``'s keyword arguments.

    A Dask DataFrame gives a Dask Series (named ``prediction``); a list of futures or
    delayed objects gives a list of futures of Polars Series, in the same order.
    """
    data = model.to_bytes()
    if _is_dask_frame(parts):
        import pandas as pd

        meta = pd.Series([], dtype="float32", name="prediction")
        return parts.map_partitions(_score_pandas, data, kwargs, meta=meta)
    return [client.submit(_score, f, data, kwargs, pure=False) for f in _futures(client, parts)]


def _is_dask_frame(parts: Any) -> bool:
    return hasattr(parts, "to_delayed") and hasattr(parts, "npartitions")


def _futures(client: Any, parts: Any) -> list[Any]:
    """``parts`` as a list of futures, in order."""
    from distributed import Future

    if _is_dask_frame(parts):
        parts = list(parts.to_delayed())
    if isinstance(parts, (pl.DataFrame, pl.LazyFrame)) or not hasattr(parts, "__iter__"):
        raise TypeError(
            "parts must be a Dask DataFrame or a list of Dask futures or delayed objects "
            f"(client.scatter(frame) makes a future of a frame), not {type(parts).__name__}"
        )
    parts = list(parts)
    if not parts:
        raise ValueError("parts is empty")
    out: list[Any] = list(parts)
    pending = [i for i, p in enumerate(parts) if not isinstance(p, Future)]
    for i in pending:
        if not hasattr(parts[i], "dask"):
            raise TypeError(
                f"parts[{i}] is a {type(parts[i]).__name__}, not a Dask future or delayed object "
                "(client.scatter(frame) makes a future of a frame)"
            )
    if pending:
        for i, f in zip(pending, client.compute([parts[i] for i in pending])):
            out[i] = f
    return out


def _as_polars(part: Any) -> pl.DataFrame:
    if isinstance(part, pl.DataFrame):
        return part
    if isinstance(part, pl.LazyFrame):
        return part.collect()
    if type(part).__module__.startswith("pandas"):
        return pl.from_pandas(part)
    return pl.DataFrame(part)


def _num_rows(part: Any) -> int:
    if isinstance(part, pl.LazyFrame):
        # A scan counts its rows from the files' metadata, reading no column.
        return int(part.select(pl.len()).collect().item())
    return _as_polars(part).height


def _reachable_host(client: Any) -> str:
    """This machine's address on the route to the scheduler (workers reach it the same way)."""
    host = urlsplit(client.scheduler.address).hostname or "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return host


def _offsets(lengths: list[int]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def _fit_on_worker(
    *parts: Any,
    layout: list[int],
    eval_names: list[str],
    distributed: dict[str, Any],
    target: Any,
    features: Any,
    params: dict[str, Any],
) -> bytes:
    """One worker's task: its training parts (the first ``layout[0]`` of ``parts``), then its
    parts of each evaluation set (``layout[1:]`` of them each, maybe none)."""
    from distributed import get_worker

    import polars_gbt

    # Lazy partitions (scans) stream: each worker reads its own twice in batches and never
    # holds their float columns; partitions in memory are concatenated as they are.
    if any(isinstance(p, pl.LazyFrame) for p in parts):
        frames: list[Any] = [p if isinstance(p, pl.LazyFrame) else _as_polars(p).lazy() for p in parts]
    else:
        frames = [_as_polars(p) for p in parts]
    frame = pl.concat(frames[: layout[0]], how="vertical_relaxed")
    sets, at = {}, layout[0]
    for name, count in zip(eval_names, layout[1:]):
        mine = frames[at : at + count]
        at += count
        sets[name] = pl.concat(mine, how="vertical_relaxed") if mine else frame.clear()
    host = urlsplit(get_worker().address).hostname or "127.0.0.1"
    shard = dict(distributed, host=host)
    model = polars_gbt.train(
        frame, target=target, features=features, eval_sets=sets or None, _distributed=shard, **params
    )
    return model.to_bytes()


def _score(part: Any, model: bytes, kwargs: dict[str, Any]) -> pl.Series:
    return Model.from_bytes(model).predict(_as_polars(part), **kwargs)


def _score_pandas(part: Any, model: bytes, kwargs: dict[str, Any]) -> Any:
    scores = _score(part, model, kwargs).to_pandas()
    scores.index = part.index
    return scores


def _first_result(client: Any, tasks: list[Any], workers: list[str]) -> bytes:
    """Rank 0's model once every worker is done, or the most telling error as soon as one
    fails (a worker's own error before a neighbour's report of losing it)."""
    from distributed import as_completed

    for t in as_completed(tasks):
        if t.status != "finished":
            break
    else:
        return client.gather(tasks[0])
    # One task failed, or was lost with its worker: the others fail within moments of it
    # (their ring breaks); collect their reasons too.
    grace = time.monotonic() + 2.0
    while time.monotonic() < grace and any(t.status == "pending" for t in tasks):
        time.sleep(0.05)
    errors = [(tasks.index(t), t.exception()) for t in tasks if t.status == "error"]
    lost = [tasks.index(t) for t in tasks if t.status not in ("finished", "error", "pending")]
    client.cancel(tasks, force=True)
    ranks = ", ".join(f"rank {r} = {w}" for r, w in enumerate(workers))
    if not errors:
        which = ", ".join(f"rank {r} ({workers[r]})" for r in lost) or "a worker"
        raise DistributedError(f"distributed fit: the task of {which} was lost (its worker died?); {ranks}")
    rank, err = _root_cause(errors)
    cls = type(err) if isinstance(err, GbtError) else DistributedError
    raise cls(f"{err} (on rank {rank}; {ranks})") from err


def _root_cause(errors: list[tuple[int, BaseException]]) -> tuple[int, BaseException]:
    """A worker's own error (bad data, a bad parameter) before reports of a lost
    neighbour, and among those the report about a worker that reported nothing itself
    (the one that died or hung)."""
    own = [(r, e) for r, e in errors if not isinstance(e, DistributedError)]
    if own:
        return own[0]
    failed = {r for r, _ in errors}
    for r, e in errors:
        peer = re.search(r"(?:from|to) rank (\d+) at", str(e))
        if peer and int(peer.group(1)) not in failed:
            return r, e
    return errors[0]
