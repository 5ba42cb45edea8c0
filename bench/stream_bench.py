"""A fit from Parquet files (on the CPU, or with --device cuda on the GPU), streamed (`polars_gbt.train(pl.scan_parquet(...))`, issue 36)
against in-core (the files collected into a DataFrame, then the fit): peak memory growth,
time, and whether the models are the same bytes.

The data: Higgs-like rows (`higgs_like.make`), 28 float32 feature columns and a float32
label, written in chunks to `--files` Parquet files (cached in `--dir`). Each mode runs in a
child process that imports everything, then reports VmHWM (the kernel's peak resident set)
less its VmRSS before the fit: the growth of the process, the collected frame included for
the in-core fit (what a user reading the files pays).

With ``--timeline``, the streamed child also samples its memory every 10 ms and reports, for
each phase (pass 1, pass 2, training), its peak and what made it up: the bytes glibc's malloc
hands out, resident once written (polars-gbt's own state: the sample, the label, the bins, the
gradients; Polars allocates with its own jemalloc, so none of its buffers are among them), the
file-backed pages
(code paged in), and the rest (Polars' buffers, the pages its allocator keeps after freeing
them, Python's objects).

With ``--modes ...,xgboost`` (and ``--device cuda``), XGBoost's external memory trains on the
same files: a `DataIter` reading them a file at a time, `ExtMemQuantileDMatrix` caching its
pages in host memory (time and growth from the matrix's start to the end of training).

Usage: python3 bench/stream_bench.py [--rows 3000000] [--files 12] [--rounds 40] [--depth 6] [--timeline]
       [--device cpu|cuda] [--n-gpus 1] [--modes collected,scan,xgboost]
       (children: --child scan|collected|xgboost)
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_bench import status  # noqa: E402  (the kernel's counters of this process, in bytes)


def write_files(directory: Path, rows: int, files: int) -> Path:
    """`files` Parquet files of `rows` rows in all, written a file at a time (cached)."""
    import numpy as np
    import polars as pl

    from higgs_like import make

    out = directory / f"higgs_{rows}_{files}"
    if (out / "done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    per = -(-rows // files)
    for i in range(files):
        n = min(per, rows - i * per)
        X, y = make(n, seed=i)
        pl.DataFrame({f"f{j}": X[:, j].astype(np.float32) for j in range(X.shape[1])}).with_columns(
            y=pl.Series(y.astype(np.float32))
        ).write_parquet(out / f"part-{i:03d}.parquet")
    (out / "done").write_text("")
    return out


class Timeline:
    """The process's memory every 10 ms on a thread of its own, and the phase each sample
    fell in (``phase`` is set by the caller): VmRSS, file-backed pages, and the bytes glibc's
    malloc has handed out (``mallinfo2``: in use, heap and mmapped chunks)."""

    def __init__(self) -> None:
        import ctypes

        class Mallinfo2(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in (
                "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

        self.libc = ctypes.CDLL("libc.so.6")
        self.libc.mallinfo2.restype = Mallinfo2
        self.phase = "row count"
        self.samples: list[dict] = []
        self.base = self.sample()
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self) -> dict:
        m = self.libc.mallinfo2()
        return dict(phase=self.phase, rss=status("VmRSS"), file=status("RssFile"), malloc=m.uordblks + m.hblkhd)

    def run(self) -> None:
        while self.running:
            self.samples.append(self.sample())
            time.sleep(0.01)

    def stop(self) -> list[dict]:
        """Per phase: its peak growth, with the malloc'd and file-backed growth at that peak."""
        self.running = False
        self.thread.join()
        out = []
        for phase in dict.fromkeys(s["phase"] for s in self.samples):
            peak = max((s for s in self.samples if s["phase"] == phase), key=lambda s: s["rss"])
            grew = {k: peak[k] - self.base[k] for k in ("rss", "malloc", "file")}
            out.append(dict(phase=phase, **grew, rest=grew["rss"] - grew["malloc"] - grew["file"]))
        return out


def child(mode: str, files: Path, rounds: int, depth: int, timeline: bool, device: str, n_gpus: int) -> None:
    import polars as pl

    import polars_gbt
    from polars_gbt import _stream

    scan = pl.scan_parquet(str(files / "*.parquet"))
    params = dict(target="y", objective="binary:logistic", n_estimators=rounds, max_depth=depth, device=device)
    if n_gpus > 1:
        params["n_gpus"] = n_gpus
    clock = Timeline() if timeline else None
    if clock is not None:
        # The phases: each pass of the training rows, then the fit.
        lazy_source = _stream._lazy_source

        def marked(frame):
            source = lazy_source(frame)
            passes = source.passes

            def marking(columns, reads):
                n_rows, open_pass = passes(columns, reads)
                opened = []

                def open_marked():
                    opened.append(True)
                    clock.phase = f"pass {len(opened)}"
                    yield from open_pass()
                    clock.phase = "cut points" if len(opened) == 1 else "training"

                return n_rows, open_marked

            source.passes = marking
            return source

        _stream._lazy_source = marked
    if mode == "xgboost":
        return child_xgboost(files, rounds, depth)
    before = status("VmRSS")
    t = time.perf_counter()
    if mode == "scan":
        model = polars_gbt.train(scan, **params)
    else:
        model = polars_gbt.train(scan.collect(), **params)
    seconds = time.perf_counter() - t
    phases = clock.stop() if clock is not None else []
    digest = hashlib.blake2b(model.to_bytes(), digest_size=8).hexdigest()
    print(json.dumps(dict(mode=mode, before=before, peak=status("VmHWM"), seconds=seconds, model=digest, phases=phases)))


def child_xgboost(files: Path, rounds: int, depth: int) -> None:
    """XGBoost's external memory over the same files: a `DataIter` reading one file at a time
    (pyarrow, then cupy arrays, so that its pages are the GPU's), `ExtMemQuantileDMatrix` with
    its cache in host memory, then `xgb.train` on the GPU. Time and growth from the start of
    the matrix to the end of training, as ours."""
    import os
    import tempfile

    import cupy as cp
    import numpy as np
    import pyarrow.parquet as pq
    import xgboost as xgb

    paths = sorted(files.glob("*.parquet"))

    class Files(xgb.DataIter):
        def __init__(self, cache: str):
            self.i = 0
            super().__init__(cache_prefix=cache, on_host=True)

        def next(self, input_data) -> bool:
            if self.i == len(paths):
                return False
            t = pq.read_table(paths[self.i])
            X = np.column_stack([t.column(f"f{j}").to_numpy() for j in range(28)])
            input_data(data=cp.asarray(X), label=cp.asarray(t.column("y").to_numpy()))
            self.i += 1
            return True

        def reset(self) -> None:
            self.i = 0

    before = status("VmRSS")
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        dm = xgb.ExtMemQuantileDMatrix(Files(os.path.join(tmp, "cache")), max_bin=256)
        params = {"tree_method": "hist", "device": "cuda", "max_depth": depth, "objective": "binary:logistic"}
        booster = xgb.train(params, dm, num_boost_round=rounds)
    seconds = time.perf_counter() - t
    digest = hashlib.blake2b(booster.save_raw("ubj"), digest_size=8).hexdigest()
    print(json.dumps(dict(mode="xgboost", before=before, peak=status("VmHWM"), seconds=seconds, model=digest, phases=[])))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--files", type=int, default=12)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--dir", type=Path, default=Path("/tmp/polars-gbt-stream-bench"))
    p.add_argument("--repeat", type=int, default=1, help="runs of each mode (the fastest time is kept)")
    p.add_argument("--timeline", action="store_true", help="the streamed fit's memory by phase and by whose it is")
    p.add_argument("--child", choices=["scan", "collected", "xgboost"])
    p.add_argument("--modes", default="collected,scan", help="which fits, in order: collected, scan, xgboost")
    p.add_argument("--files-dir", type=Path)
    p.add_argument("--device", default="cpu", help="cpu, or cuda: the rows binned on the host train on the GPU")
    p.add_argument("--n-gpus", type=int, default=1, help="GPUs of the process (device cuda): each trains its share")
    a = p.parse_args()
    if a.child:
        child(a.child, a.files_dir, a.rounds, a.depth, a.timeline, a.device, a.n_gpus)
        return
    files = write_files(a.dir, a.rows, a.files)
    raw = a.rows * 28 * 4  # the float32 feature columns
    results = {}
    for mode in a.modes.split(",") * a.repeat:
        cmd = [sys.executable, __file__, "--child", mode, "--files-dir", str(files), "--rounds", str(a.rounds), "--depth", str(a.depth), "--device", a.device, "--n-gpus", str(a.n_gpus)]
        if a.timeline and mode == "scan":
            cmd.append("--timeline")
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        growth = r["peak"] - r["before"]
        best = results.get(mode)
        if best is None or r["seconds"] < best["seconds"]:
            results[mode] = dict(r, growth=growth)
        print(f"{mode:9s} growth {growth / 2**20:7.1f} MiB = {growth / raw:.2f}x the raw feature columns "
              f"({raw / 2**20:.0f} MiB), {r['seconds']:.2f} s, model {r['model']}", flush=True)
        for ph in r["phases"]:
            mib = {k: ph[k] / 2**20 for k in ("rss", "malloc", "file", "rest")}
            print(f"    {ph['phase']:9s} peak {mib['rss']:6.1f} MiB: malloc'd (polars-gbt) {mib['malloc']:6.1f}, "
                  f"file-backed {mib['file']:5.1f}, the rest (Polars, Python) {mib['rest']:6.1f}", flush=True)
    s, c, x = results.get("scan"), results.get("collected"), results.get("xgboost")
    if s and c:
        print(f"scan / collected: growth {s['growth'] / c['growth']:.2f}x, time {s['seconds'] / c['seconds']:.2f}x, "
              f"same model: {s['model'] == c['model']}")
    if s and x:
        print(f"scan / XGBoost external memory: growth {s['growth'] / x['growth']:.2f}x, time {s['seconds'] / x['seconds']:.2f}x")


if __name__ == "__main__":
    main()
