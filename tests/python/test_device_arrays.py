"""Scoring arrays that lie in GPU memory (``Model.predict`` / ``Model.contributions`` on a cupy
array, or anything with DLPack or ``__cuda_array_interface__``).

Without a GPU (CI): the checks made before any CUDA call, on stand-in objects that state a
device, a shape and a dtype through the protocols; and the clear error when no GPU can be
used. On the GPU machine (cupy installed; scripts/gpu-device-arrays.sh): scores of cupy
arrays equal the scores of the same rows from a Polars frame on the GPU bit for bit, in C and
Fortran order, float32 and float64, with missing values and categorical codes; SHAP values
equal them up to the kernels' unordered float sums; and bad arrays are clear errors.
"""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest

import polars_gbt
from polars_gbt._internal import cuda_unavailable_reason

if os.environ.get("POLARS_GBT_REQUIRE_GPU") == "1":
    assert polars_gbt.cuda_available(), f"the GPU is required here: {cuda_unavailable_reason()}"
    import cupy  # noqa: F401  (the GPU machine has it: its tests must not skip)

try:
    import cupy as cp
except ImportError:  # CI: no cupy, no GPU
    cp = None

gpu = pytest.mark.skipif(
    cp is None or not polars_gbt.cuda_available(),
    reason=f"needs cupy and a usable GPU ({cuda_unavailable_reason()})",
)
no_gpu = pytest.mark.skipif(polars_gbt.cuda_available(), reason="a GPU is present")

CATEGORIES = ["north", "east", "south", "west"]


def frame(n: int, seed: int, unseen: bool = False) -> pl.DataFrame:
    """Three numeric features with NaN (missing) values and a categorical one with nulls;
    with ``unseen``, some rows hold a category no model saw."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    a[rng.random(n) < 0.1] = np.nan
    b = rng.uniform(-3, 3, size=n)
    b[rng.random(n) < 0.05] = np.nan
    c = rng.exponential(size=n) * 1e3
    names = CATEGORIES + (["nowhere"] if unseen else [])
    cat = rng.choice(names, size=n).astype(object)
    cat[rng.random(n) < 0.05] = None
    return pl.DataFrame(
        {"a": a, "b": b, "c": c, "d": pl.Series(cat, dtype=pl.String).cast(pl.Categorical)},
    )


def target(df: pl.DataFrame) -> pl.Series:
    d = df["d"].cast(pl.String)
    bump = (d == "east").cast(pl.Float64).fill_null(0.5) - (d == "west").cast(pl.Float64).fill_null(0.0)
    return (df["a"].fill_nan(0.0) * 2 + df["b"].fill_nan(1.0).abs() + bump + df["c"] / 1e3).alias("y")


def codes(model: polars_gbt.Model, df: pl.DataFrame, dtype: type) -> np.ndarray:
    """The rows as a 2-D array: numbers as they are, categories as the model's codes (NaN for
    a null, a code past the model's categories for one it never saw)."""
    names = model.categories["d"]
    lookup = {name: float(i) for i, name in enumerate(names)}
    d = np.array([np.nan if v is None else lookup.get(v, 1000.0) for v in df["d"].cast(pl.String).to_list()])
    return np.column_stack([df["a"].to_numpy(), df["b"].to_numpy(), df["c"].to_numpy(), d]).astype(dtype)


@pytest.fixture(scope="module")
def model() -> polars_gbt.Model:
    df = frame(4000, 0)
    return polars_gbt.train(df.with_columns(target(df)), target="y", n_estimators=30, max_depth=6, seed=0)


@pytest.fixture(scope="module")
def classifier() -> polars_gbt.Model:
    df = frame(3000, 1)
    label = (target(df).rank("ordinal") * 3 // (len(df) + 1)).cast(pl.Int64).alias("y")
    return polars_gbt.train(
        df.with_columns(label), target="y", objective="multi:softprob", num_class=3, n_estimators=8, max_depth=4
    )


class Interface:
    """An array as the CUDA Array Interface states it, and nothing else: a stand-in for any
    producer (and, with a made-up pointer, for a bad one)."""

    def __init__(self, shape, typestr="<f4", ptr=0x1000, strides=None, stream=None, keep=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, True),
            "strides": strides,
            "version": 3,
        }
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream
        self.shape = tuple(shape)
        self.keep = keep  # the array whose memory this states, kept alive


class DLPackOn:
    """An object on a DLPack device, which must be refused before it is exported."""

    def __init__(self, device_type: int, device_id: int):
        self.device = (device_type, device_id)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        raise AssertionError("a refused array must not be exported")


# --- checks made before any CUDA call (no GPU needed) ---------------------------------------


def test_the_wrong_number_of_columns_is_a_data_error(model):
    with pytest.raises(polars_gbt.DataError, match="has 3 columns but the model has 4 features"):
        model.predict(Interface((10, 3)))


@pytest.mark.parametrize(("typestr", "name"), [("<i8", "int64"), ("<f2", "float16"), ("|b1", "bool"), ("<i4", "int32")])
def test_dtypes_other_than_float32_and_float64_are_data_errors(model, typestr, name):
    with pytest.raises(polars_gbt.DataError, match=f"dtype {name}; device arrays are scored as float32 or float64"):
        model.predict(Interface((10, 4), typestr=typestr))


@pytest.mark.parametrize("shape", [(40,), (10, 4, 1)])
def test_arrays_that_are_not_two_dimensional_are_data_errors(model, shape):
    with pytest.raises(polars_gbt.DataError, match=r"must be 2-D \(rows x the model's features\)"):
        model.predict(Interface(shape))


def test_host_arrays_are_a_data_error_that_says_how_to_score_them(model):
    rows = np.zeros((5, 4), dtype=np.float32)
    with pytest.raises(polars_gbt.DataError, match=r"host memory \(DLPack device CPU\).*pl.from_numpy"):
        model.predict(rows)
    with pytest.raises(polars_gbt.DataError, match="host memory"):
        model.contributions(rows)
    with pytest.raises(polars_gbt.DataError, match="host memory"):
        model.predict(DLPackOn(3, 0))  # CUDA pinned host memory


def test_arrays_on_another_gpu_or_device_kind_are_data_errors(model):
    with pytest.raises(polars_gbt.DataError, match="is on GPU 1, and polars-gbt scores on GPU 0"):
        model.predict(DLPackOn(2, 1))
    with pytest.raises(polars_gbt.DataError, match="DLPack device type 10; only CUDA GPUs"):
        model.predict(DLPackOn(10, 0))


def test_device_cpu_and_base_margin_are_parameter_errors_for_device_arrays(model):
    with pytest.raises(polars_gbt.ParameterError, match='`device`: "cpu" cannot score an array in GPU memory'):
        model.predict(Interface((10, 4)), device="cpu")
    with pytest.raises(polars_gbt.ParameterError, match="`base_margin`: not supported"):
        model.predict(Interface((10, 4)), base_margin=np.zeros(10))


def test_frames_still_score_on_the_cpu_by_default(model):
    df = frame(50, 5)
    assert model.predict(df).dtype == pl.Float32
    assert model.contributions(df).columns == ["a", "b", "c", "d", "bias"]


def test_categories_give_each_categorical_feature_its_codes(model):
    assert model.categories == {"d": sorted(CATEGORIES)}


@no_gpu
def test_without_a_gpu_a_device_array_is_a_device_error(model):
    with pytest.raises(polars_gbt.DeviceError, match="scored on the GPU, which cannot be used here"):
        model.predict(Interface((10, 4)))
    with pytest.raises(polars_gbt.DeviceError, match="scored on the GPU"):
        model.contributions(Interface((10, 4), typestr="<f8"))


# --- on the GPU -----------------------------------------------------------------------------


def host_scores(model, df, dtype, **kwargs) -> np.ndarray:
    """The same rows scored from a Polars frame on the GPU, numeric columns in `dtype`."""
    pl_dtype = pl.Float32 if dtype == np.float32 else pl.Float64
    df = df.with_columns(pl.col("a", "b", "c").cast(pl_dtype))
    return model.predict(df, device="cuda", **kwargs).to_numpy()


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["C", "F"])
def test_cupy_rows_score_as_the_same_rows_from_a_frame_bit_for_bit(model, dtype, order):
    df = frame(30_000, 7, unseen=True)
    rows = cp.asarray(codes(model, df, dtype), order=order)
    assert rows.flags.c_contiguous == (order == "C")
    for output in ("value", "margin", "leaf"):
        got = model.predict(rows, output=output)
        assert isinstance(got, cp.ndarray)
        want = host_scores(model, df, dtype, output=output)
        assert got.dtype == (cp.uint32 if output == "leaf" else cp.float32)
        assert got.shape == want.shape
        assert np.array_equal(cp.asnumpy(got), want), output


@gpu
def test_strided_views_score_as_their_rows(model):
    df = frame(5000, 8)
    wide = cp.asarray(np.repeat(codes(model, df, np.float64), 2, axis=1))  # every column twice
    view = wide[::-1, ::2]  # negative row stride, column stride 2
    got = cp.asnumpy(model.predict(view))
    want = host_scores(model, df.reverse(), np.float64)
    assert np.array_equal(got, want)


@gpu
def test_multiclass_values_margins_classes_and_leaves_equal_the_frames(classifier):
    df = frame(20_000, 9)
    rows = cp.asarray(codes(classifier, df, np.float32))
    for output in ("value", "margin", "class", "leaf"):
        got = cp.asnumpy(classifier.predict(rows, output=output))
        want = host_scores(classifier, df, np.float32, output=output)
        assert got.shape == want.shape, output
        assert np.array_equal(got, want), output


@gpu
@pytest.mark.parametrize("which", ["model", "classifier"])
def test_cupy_contributions_equal_the_frames(which, model, classifier):
    m = model if which == "model" else classifier
    df = frame(8000, 10, unseen=True)
    got = m.contributions(cp.asarray(codes(m, df, np.float64), order="F"))
    assert isinstance(got, cp.ndarray) and got.dtype == cp.float32
    host = m.predict(df, output="contrib", device="cuda").to_numpy()
    got = cp.asnumpy(got)
    assert got.shape == host.shape
    # The bias (last value of each output) is written whole; the rest are sums of float
    # atomics in no fixed order, on both paths.
    assert np.array_equal(got[..., -1], host[..., -1])
    np.testing.assert_allclose(got, host, rtol=1e-5, atol=1e-5)
    # They sum to the margins.
    margins = cp.asnumpy(m.predict(cp.asarray(codes(m, df, np.float64)), output="margin"))
    np.testing.assert_allclose(got.sum(axis=-1), margins, rtol=1e-4, atol=1e-4)


@gpu
def test_other_producers_get_a_cupy_array_and_their_stream_is_waited_for(model):
    df = frame(10_000, 11)
    rows = cp.asarray(codes(model, df, np.float32))
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        busy = rows * 1.0  # queued on `stream`, which the interface names
        iface = Interface(busy.shape, "<f4", busy.data.ptr, stream=stream.ptr, keep=busy)
        got = model.predict(iface)
    assert isinstance(got, cp.ndarray)
    assert np.array_equal(cp.asnumpy(got), host_scores(model, df, np.float32))
    # And an empty array gives an empty result.
    assert model.predict(rows[:0]).shape == (0,)


@gpu
def test_bad_device_arrays_are_clear_errors(model):
    rows = cp.zeros((100, 4), dtype=cp.float32)
    with pytest.raises(polars_gbt.DataError, match="has 5 columns but the model has 4"):
        model.predict(cp.zeros((10, 5), dtype=cp.float32))
    with pytest.raises(polars_gbt.DataError, match="dtype int64"):
        model.predict(cp.zeros((10, 4), dtype=cp.int64))
    with pytest.raises(polars_gbt.DataError, match="dtype float16"):
        model.predict(cp.zeros((10, 4), dtype=cp.float16))
    # A pointer CUDA never gave out.
    with pytest.raises(polars_gbt.DataError, match="is not memory CUDA knows"):
        model.predict(Interface((10, 4), "<f4", 0x1000))
    # More rows than the memory holds.
    with pytest.raises(polars_gbt.DataError, match="past its allocation"):
        model.predict(Interface((10**7, 4), "<f4", rows.data.ptr, keep=rows))
    # Strides that split elements; a stream the interface disallows.
    with pytest.raises(polars_gbt.DataError, match="not a whole number of 4-byte elements"):
        model.predict(Interface((10, 4), "<f4", rows.data.ptr, strides=(16, 2), keep=rows))
    with pytest.raises(polars_gbt.DataError, match="stream 0"):
        model.predict(Interface((10, 4), "<f4", rows.data.ptr, stream=0, keep=rows))
    if cp.cuda.runtime.getDeviceCount() > 1:
        with cp.cuda.Device(1):
            elsewhere = cp.zeros((10, 4), dtype=cp.float32)
        with pytest.raises(polars_gbt.DataError, match="is on GPU 1"):
            model.predict(elsewhere)
