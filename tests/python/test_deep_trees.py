"""Deep trees as a user meets them: an XGBoost JSON file whose tree is a chain (each split's
left child the next split, its right child a leaf), loaded with ``Model.from_xgboost`` and
scored through the plugin. Chains of 50,000 and 100,000 splits once killed the process (a
stack overflow in SHAP values, a SIGSEGV in prediction); tests/deep_trees.rs checks every
format and depths up to a million against an oracle, this checks the Python path."""

import json

import numpy as np
import polars as pl
import pytest

import polars_gbt


def chain_model(depth: int) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """Split i (node 2i) tests feature i % 2 against a threshold falling from 1 to 0; its left
    child is the next split (node 2i + 2), its right child a leaf (node 2i + 1); missing
    values go left, down the chain. Returns the file and the thresholds, leaf values, covers."""
    n = 2 * depth + 1
    i = np.arange(depth)
    thresholds = np.floor((depth - i) * 2.0**20 / depth) / 2.0**20
    left = np.full(n, -1)
    right = np.full(n, -1)
    left[2 * i] = 2 * i + 2
    right[2 * i] = 2 * i + 1
    values = np.zeros(n)
    values[2 * i + 1] = (i % 7) * 0.25 - 0.75
    values[n - 1] = 2.0
    cover = np.ones(n)
    cover[2 * i] = depth - i + 1  # every leaf below has cover 1
    cond = values.copy()
    cond[2 * i] = thresholds
    split_index = np.zeros(n, dtype=np.int64)
    split_index[2 * i] = i % 2
    default_left = np.zeros(n, dtype=np.int64)
    default_left[2 * i] = 1
    tree = {
        "id": 0,
        "left_children": left.tolist(),
        "right_children": right.tolist(),
        "split_indices": split_index.tolist(),
        "split_conditions": cond.tolist(),
        "default_left": default_left.tolist(),
        "split_type": [0] * n,
        "sum_hessian": cover.tolist(),
        "loss_changes": [1.0] * n,
        "categories": [],
        "categories_nodes": [],
        "categories_segments": [],
        "categories_sizes": [],
        "tree_param": {"num_nodes": str(n), "size_leaf_vector": "1"},
    }
    doc = {
        "learner": {
            "learner_model_param": {"base_score": "5E-1", "num_class": "0", "num_feature": "2", "num_target": "1"},
            "objective": {"name": "reg:squarederror"},
            "feature_names": ["a", "b"],
            "feature_types": ["float", "float"],
            "gradient_booster": {"name": "gbtree", "model": {"trees": [tree], "tree_info": [0]}},
        },
        "version": [3, 0, 0],
    }
    return json.dumps(doc).encode(), thresholds, values, cover


def walk(thresholds: np.ndarray, values: np.ndarray, row: tuple[float, float]) -> float:
    """The margin of `row`: 0.5 plus the leaf where it leaves the chain (at the first split
    whose value is present and not below the threshold)."""
    xs = np.where(np.arange(len(thresholds)) % 2 == 0, row[0], row[1])
    leaves = ~(np.isnan(xs) | (xs < thresholds))
    return 0.5 + (values[2 * int(np.argmax(leaves)) + 1] if leaves.any() else values[-1])


@pytest.mark.parametrize("depth", [50_000, 100_000])
def test_deep_chains_from_xgboost_predict_and_explain_through_the_plugin(depth):
    raw, thresholds, values, _ = chain_model(depth)
    model = polars_gbt.Model.from_xgboost(raw)
    rng = np.random.default_rng(depth)
    a = (2 * rng.integers(0, 2**20, 6) + 1) / 2.0**21
    b = (2 * rng.integers(0, 2**20, 6) + 1) / 2.0**21
    df = pl.DataFrame({"a": [*a.tolist(), None, 0.0], "b": [*b.tolist(), None, None]}, schema={"a": pl.Float32, "b": pl.Float32})
    rows = [(np.nan if x is None else x, np.nan if y is None else y) for x, y in zip(df["a"].to_list(), df["b"].to_list())]

    margins = df.select(pl.col("a", "b").gbt.predict(model.to_bytes(), output="margin")).to_series()
    want = [walk(thresholds, values, r) for r in rows]
    np.testing.assert_allclose(margins.to_numpy(), want, rtol=0, atol=1e-5)

    contrib = model.contributions(df)
    assert contrib.columns == ["a", "b", "bias"]
    np.testing.assert_allclose(contrib.sum_horizontal().to_numpy(), want, rtol=0, atol=1e-4)
    assert np.isfinite(contrib.to_numpy()).all()


def test_a_million_split_chain_loads_and_predicts():
    raw, thresholds, values, _ = chain_model(1_000_000)
    model = polars_gbt.Model.from_xgboost(raw)
    df = pl.DataFrame({"a": [0.3, 0.9, None], "b": [0.2, 0.95, None]}, schema={"a": pl.Float32, "b": pl.Float32})
    rows = [(0.3, 0.2), (0.9, 0.95), (np.nan, np.nan)]
    margins = model.predict(df, output="margin")
    want = [walk(thresholds, values, (np.float32(x), np.float32(y))) for x, y in rows]
    np.testing.assert_allclose(margins.to_numpy(), want, rtol=0, atol=1e-5)
    assert len(model.trees_to_dataframe()) == 2_000_001
