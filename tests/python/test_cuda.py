"""device="cuda" and "auto" through Polars. Without a GPU (as in CI): "cuda" is a clear
error, never a panic, and "auto" trains on the CPU and says so. With one (the device
machine, see docs/benchmarks.md): the GPU fits equal the CPU fits."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest
from conftest import FEATURES

import polars_gbt
from polars_gbt._internal import cuda_unavailable_reason

PARAMS = dict(objective="reg:squarederror", n_estimators=10, max_depth=5, seed=0)
if os.environ.get("POLARS_GBT_REQUIRE_GPU") == "1":
    # On the GPU machine: a runtime that fails to start must fail, not skip.
    assert polars_gbt.cuda_available(), f"the GPU is required here: {cuda_unavailable_reason()}"
gpu = pytest.mark.skipif(not polars_gbt.cuda_available(), reason=f"no usable GPU: {cuda_unavailable_reason()}")
no_gpu = pytest.mark.skipif(polars_gbt.cuda_available(), reason="a GPU is present")


@no_gpu
def test_cuda_without_a_gpu_is_a_clear_error(train_df):
    with pytest.raises(pl.exceptions.ComputeError, match='device="cuda" cannot be used') as info:
        train_df.head(500).select(pl.col(FEATURES).gbt.fit("y", device="cuda", **PARAMS))
    assert "panicked" not in str(info.value)


def test_n_gpus_is_checked_before_any_device_is_touched(train_df):
    df = train_df.head(300)
    with pytest.raises(polars_gbt.ParameterError, match='n_gpus.*device="cuda"'):
        df.select(pl.col(FEATURES).gbt.fit("y", device="cpu", n_gpus=2, **PARAMS))
    with pytest.raises(polars_gbt.ParameterError, match="n_gpus.*at least 1"):
        df.select(pl.col(FEATURES).gbt.fit("y", device="cuda", n_gpus=0, **PARAMS))


@no_gpu
def test_several_gpus_without_a_gpu_is_a_clear_error(train_df):
    with pytest.raises(pl.exceptions.ComputeError, match='device="cuda" cannot be used') as info:
        train_df.head(500).select(pl.col(FEATURES).gbt.fit("y", device="cuda", n_gpus=2, **PARAMS))
    assert "panicked" not in str(info.value)


@no_gpu
def test_auto_without_a_gpu_trains_on_the_cpu_and_says_so(train_df, capfd):
    df = train_df.head(2000)
    auto = df.select(pl.col(FEATURES).gbt.fit("y", device="auto", verbose=1, **PARAMS)).item()
    assert 'device="auto" trains on the CPU' in capfd.readouterr().err
    cpu = df.select(pl.col(FEATURES).gbt.fit("y", device="cpu", **PARAMS)).item()
    p = df.select(pl.col(FEATURES).gbt.predict(auto))["f0"].to_numpy()
    q = df.select(pl.col(FEATURES).gbt.predict(cpu))["f0"].to_numpy()
    assert np.array_equal(p, q)


@gpu
def test_gpu_fits_equal_cpu_fits_in_select_and_group_by(train_df):
    df = train_df.with_columns(g=pl.int_range(pl.len()) % 5)
    fits = {}
    for device in ("cpu", "cuda"):
        model = df.select(pl.col(FEATURES).gbt.fit("y", device=device, **PARAMS)).item()
        fits[device] = df.select(pl.col(FEATURES).gbt.predict(model))["f0"].to_numpy()
    assert np.array_equal(fits["cpu"], fits["cuda"])
    per_group = {
        device: df.group_by("g")
        .agg(pl.col(FEATURES).gbt.fit("y", device=device, **PARAMS).alias("m"))
        .sort("g")
        for device in ("cpu", "cuda")
    }
    for cpu, cuda in zip(per_group["cpu"]["m"], per_group["cuda"]["m"]):
        p = df.select(pl.col(FEATURES).gbt.predict(cpu))["f0"].to_numpy()
        q = df.select(pl.col(FEATURES).gbt.predict(cuda))["f0"].to_numpy()
        assert np.array_equal(p, q)


@gpu
def test_many_small_gpu_fits_side_by_side_grow_the_cpus_trees(train_df):
    # by= hands the groups over at once: on the GPU the small fits share it, each on its own
    # stream and with an upload buffer another fit gave back. Each group's trees must be the
    # CPU's, and each fit alone's.
    df = train_df.with_columns(g=pl.int_range(pl.len()) % 48)
    fit = lambda device: pl.col(FEATURES).gbt.fit("y", by="g", device=device, **PARAMS)  # noqa: E731
    models = {device: df.select(fit(device)).unnest("model").sort("g") for device in ("cpu", "cuda")}
    trees = {d: [polars_gbt.Model.from_bytes(m).trees_to_dataframe() for m in models[d]["model"]] for d in models}
    assert len(trees["cuda"]) == 48
    for g, (cpu, cuda) in enumerate(zip(trees["cpu"], trees["cuda"])):
        assert cpu.equals(cuda), f"group {g}"
    alone = df.filter(pl.col("g") == 7).select(pl.col(FEATURES).gbt.fit("y", device="cuda", **PARAMS)).item()
    assert polars_gbt.Model.from_bytes(alone).trees_to_dataframe().equals(trees["cuda"][7])


@gpu
def test_out_of_memory_is_a_clear_error_and_frees_everything(train_df):
    cupy = pytest.importorskip("cupy")
    assert polars_gbt.cuda_available()  # the runtime (context, kernels) starts before the squeeze
    big = pl.concat([train_df] * 300)  # 2M rows: ~150 MiB on the device, far more than is left
    # Leave the GPU less free memory than the fit needs (about 40 bytes a row, plus the bins):
    # take it in ever smaller pieces until nothing more is given.
    hog, piece = [], 1 << 30
    while piece >= 1 << 20:
        try:
            hog.append(cupy.empty(piece, dtype=cupy.uint8))
        except cupy.cuda.memory.OutOfMemoryError:
            piece //= 2
    try:
        with pytest.raises(pl.exceptions.ComputeError, match="out of memory.*MiB") as info:
            big.select(pl.col(FEATURES).gbt.fit("y", device="cuda", **PARAMS))
        assert "panicked" not in str(info.value)
    finally:
        del hog
        cupy.get_default_memory_pool().free_all_blocks()
    # Nothing leaked: the same fit now runs.
    model = big.select(pl.col(FEATURES).gbt.fit("y", device="cuda", **PARAMS)).item()
    assert polars_gbt.Model.from_bytes(model).num_trees == PARAMS["n_estimators"]


@no_gpu
def test_predict_on_cuda_without_a_gpu_is_a_clear_error(train_df):
    model = train_df.head(500).select(pl.col(FEATURES).gbt.fit("y", **PARAMS)).item()
    with pytest.raises(pl.exceptions.ComputeError, match="device") as info:
        train_df.head(10).select(pl.col(FEATURES).gbt.predict(model, device="cuda"))
    assert "panicked" not in str(info.value)
    # "auto" scores on the CPU.
    auto = train_df.head(10).select(pl.col(FEATURES).gbt.predict(model, device="auto"))
    cpu = train_df.head(10).select(pl.col(FEATURES).gbt.predict(model))
    assert auto.equals(cpu)


@gpu
@pytest.mark.parametrize("output", ["value", "margin", "class", "leaf"])
def test_gpu_predictions_equal_cpu_predictions_in_lazy_and_streaming_queries(train_df, output):
    model = train_df.select(
        pl.col(FEATURES).gbt.fit("y", objective="binary:logistic", n_estimators=30, max_depth=6)
    ).item()
    # Several small chunks, so the streaming engine feeds the plugin many batches.
    df = pl.concat([train_df.with_columns(pl.col("f3").fill_nan(None))] * 20, rechunk=False)
    lazy = df.lazy().select(pl.col(FEATURES).gbt.predict(model, output=output, device="cuda"))
    gpu_stream = lazy.collect(engine="streaming").to_series()
    gpu_eager = df.select(pl.col(FEATURES).gbt.predict(model, output=output, device="cuda")).to_series()
    cpu = df.select(pl.col(FEATURES).gbt.predict(model, output=output)).to_series()
    if output in ("class", "leaf"):
        assert gpu_stream.equals(cpu) and gpu_eager.equals(cpu)
    else:
        np.testing.assert_allclose(gpu_stream.to_numpy(), cpu.to_numpy(), rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(gpu_eager.to_numpy(), cpu.to_numpy(), rtol=2e-6, atol=1e-7)


@gpu
def test_concurrent_gpu_predictions_from_many_threads(train_df):
    from concurrent.futures import ThreadPoolExecutor

    model = train_df.select(pl.col(FEATURES).gbt.fit("y", n_estimators=20, max_depth=5)).item()
    parts = [train_df.slice(i * 700, 700) for i in range(10)]
    expected = [p.select(pl.col(FEATURES).gbt.predict(model)).to_series() for p in parts]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda p: p.select(pl.col(FEATURES).gbt.predict(model, device="cuda")).to_series(), parts * 4))
    for i, g in enumerate(got):
        np.testing.assert_allclose(g.to_numpy(), expected[i % 10].to_numpy(), rtol=2e-6, atol=1e-7)


@gpu
def test_constrained_gpu_fits_equal_cpu_fits(train_df):
    params = PARAMS | dict(
        monotone_constraints={"f0": 1, "f5": -1},
        interaction_constraints=[["f0", "f1", "f2"], ["f2", "f5", "f25"], ["f26", "f27"]],
    )
    trees = {
        device: polars_gbt.Model.from_bytes(
            train_df.select(pl.col(FEATURES).gbt.fit("y", device=device, **params)).item()
        ).trees_to_dataframe()
        for device in ("cpu", "cuda")
    }
    assert trees["cpu"].equals(trees["cuda"])


@gpu
def test_interval_multi_target_and_quantile_gpu_fits_grow_the_cpus_trees(train_df):
    """survival:aft (interval labels, host gradients), several targets (the pointwise kernel
    reading each output's own label) and several quantiles (leaves refit from the rows the
    device places in them) through Polars: the CPU's trees on the GPU."""
    df = train_df.head(20_000).with_columns(
        lo=pl.col("f0").abs() + 0.1,
        hi=pl.when(pl.int_range(pl.len()) % 3 == 0).then(float("inf")).otherwise(pl.col("f0").abs() + 0.1),
        y2=pl.col("f1") * 2 - pl.col("f2"),
    )
    fits = [
        ("lo", dict(PARAMS, objective="survival:aft", label_upper_bound="hi", aft_loss_distribution="logistic")),
        (pl.concat_arr(pl.col("y").cast(pl.Float64), "y2"), PARAMS),
        (pl.concat_arr((pl.col("y") > 0).cast(pl.Float32), (pl.col("y2") > 0).cast(pl.Float32)),
         dict(PARAMS, objective="binary:logistic")),
        ("y2", dict(PARAMS, objective="reg:quantileerror", quantile_alpha=[0.2, 0.5, 0.8], subsample=0.8)),
        ("y2", dict(PARAMS, objective="reg:absoluteerror", weight=pl.col("f3").abs())),
    ]
    for target, params in fits:
        trees = {
            device: polars_gbt.Model.from_bytes(
                df.select(pl.col(FEATURES).gbt.fit(target, device=device, **params)).item()
            ).trees_to_dataframe()
            for device in ("cpu", "cuda")
        }
        assert trees["cpu"].equals(trees["cuda"]), params


@gpu
def test_a_python_objective_on_the_gpu_grows_the_cpus_trees(train_df):
    def logistic(predt, label):
        p = 1.0 / (1.0 + np.exp(-predt))
        return p - label, p * (1.0 - p)

    params = PARAMS | dict(objective="binary:logistic", base_score=0.5)
    trees = {
        device: polars_gbt.train(train_df.head(20_000), target="y", obj=logistic, device=device, **params)
        .trees_to_dataframe()
        for device in ("cpu", "cuda")
    }
    assert trees["cpu"].equals(trees["cuda"])


@gpu
@pytest.mark.parametrize("output", ["contrib", "interaction"])
def test_gpu_shap_values_equal_cpu_shap_values_through_polars(output):
    # Every kind of column a frame holds: an Int8, a categorical, a float with nulls; three classes.
    rng = np.random.default_rng(5)
    n = 3_000
    df = pl.DataFrame(
        {
            "small": pl.Series(rng.integers(-5, 5, n), dtype=pl.Int8),
            "colour": pl.Series(rng.choice(["red", "green", "blue", "grey"], n)).cast(pl.Categorical),
            "x": rng.normal(size=n),
        }
    ).with_columns(
        x=pl.when(pl.int_range(pl.len()) % 5 == 0).then(None).otherwise(pl.col("x")),
        y=((pl.col("small") + (pl.col("colour") == "red")) % 3).abs().cast(pl.Int32),
    )
    model = polars_gbt.train(df, target="y", objective="multi:softprob", num_class=3, n_estimators=8, max_depth=4)
    feats = df.drop("y")
    cpu = model.predict(feats, output=output, device="cpu").to_numpy()
    cuda = model.predict(feats, output=output, device="cuda").to_numpy()
    assert cuda.shape == cpu.shape
    np.testing.assert_allclose(cuda, cpu, rtol=1e-5, atol=1e-5 * np.abs(cpu).max())
    expr = feats.select(pl.all().gbt.predict(model.to_bytes(), output=output, device="cuda")).to_series().to_numpy()
    np.testing.assert_allclose(expr, cpu, rtol=1e-5, atol=1e-5 * np.abs(cpu).max())
