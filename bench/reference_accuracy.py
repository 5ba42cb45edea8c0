"""Reference accuracy figures from XGBoost and LightGBM on the shared test datasets.

What it measures
----------------
For nine cases (binary, regression with base margin, multiclass, lambdarank,
categorical, agaricus, agaricus-lepiota, machine, dermatology) it trains
XGBoost (``tree_method="hist"``) and LightGBM with the same hyper-parameters,
predicts the test split, and computes every metric itself with numpy (the
definitions are in the ``metric_*`` functions below). It prints library
versions and a markdown table: dataset | objective | metric | xgboost | lightgbm.
Everything runs on 1 thread with seed 0, so the figures are reproducible.

These are the figures the Rust tests of polars-gbt compare against, so the data
is loaded exactly as those tests load it (see "Data conventions").

How to run
----------
    python -m venv .venv-bench && .venv-bench/bin/pip install -r bench/requirements.txt
    .venv-bench/bin/python bench/reference_accuracy.py [--data /work/shared/data]

Data conventions (the Rust tests follow the same rules)
-------------------------------------------------------
* 1-based LibSVM (agaricus, rank.*): an index absent from a row is MISSING (NaN),
  as XGBoost treats it. n_features = max index seen in the TRAIN file
  (agaricus 126, rank 300); column j holds index j+1. Explicit values are kept
  as written (an explicit ``k:0`` is the value 0, not missing).
* categorical.data (0-based LibSVM, 8 features): absent index = value 0.
  Features 0,1,4,5,6 are categorical, the integer value is the category code.
  Split: row i (0-based, file order) is test iff i % 5 == 0.
* agaricus-lepiota: label 'p' -> 1, 'e' -> 0; the 22 other columns are
  categorical; '?' is missing. Category codes: the distinct letters of a column
  over the WHOLE file (train+test, '?' excluded), sorted, code = position.
  Split i % 5 == 0 -> test.
* machine.data: features = vendor (categorical, col 1, codes = sorted distinct
  vendor names over the whole file) + cols 3..8 (MYCT, MMIN, MMAX, CACH, CHMIN,
  CHMAX) as floats; label = ln(PRP) (col 9); model name and ERP dropped.
  Split i % 5 == 0 -> test.
* dermatology: 34 features (col 34 age: '?' = missing), label = col 35 - 1.
  Split i % 5 == 0 -> test.
* binary_classification: binary.train with binary.train.weight as sample
  weights; test metrics weighted by binary.test.weight.
* regression: regression.{train,test} with regression.{train,test}.init as base
  margin (XGBoost ``base_margin``, LightGBM ``init_score``; LightGBM's predict
  does not take it, so it is added to the raw test prediction).
* multiclass: 5 classes. lambdarank: rank.{train,test} with .query group sizes.

Categorical features reach XGBoost as pandas ``category`` columns
(``enable_categorical=True``) whose codes are the codes above, and LightGBM as
the same integer codes (float, NaN = missing) with ``categorical_feature``.

Parameter mapping XGBoost -> LightGBM (chosen to make LightGBM as close as
possible to XGBoost's semantics)
---------------------------------------------------------------------------
  eta 0.1                      -> learning_rate 0.1
  max_depth d (depthwise)      -> max_depth d, num_leaves 2**d (leaf-wise growth
                                  limited this way can reach the same full tree)
  lambda 1, alpha 0            -> lambda_l2 1, lambda_l1 0
  gamma 0                      -> min_gain_to_split 0
  min_child_weight 1           -> min_sum_hessian_in_leaf 1
  (no count limit)             -> min_data_in_leaf 1
  max_bin 256                  -> max_bin 255 by default (LightGBM's default and
                                  the value the task asked for). LightGBM's CPU
                                  learner does accept 256 (only its GPU learner
                                  stops at 255); ``--lgb-max-bin 256`` runs that.
                                  Small data is sensitive to it: see
                                  docs/reference-accuracy.md for both.
  (no minimum count per bin)   -> min_data_in_bin 1 (default 3 would also drop
                                  rare CATEGORIES into the missing bin:
                                  categorical.data has dozens of them)
  subsample 1, colsample 1     -> bagging off (freq 0, fraction 1), feature_fraction 1
  max_cat_to_onehot 4          -> max_cat_to_onehot 4 (set on both)
  max_cat_threshold 64         -> max_cat_threshold 64 (LightGBM default is 32)
  categories sorted by G/(H+lambda) -> cat_smooth 1 (= lambda; LightGBM sorts by
                                  G/(H+cat_smooth) and also drops categories with
                                  count < cat_smooth), cat_l2 0 (LightGBM adds it
                                  to lambda_l2 on categorical splits),
                                  min_data_per_group 1
  rank:ndcg topk (32 pairs)    -> lambdarank truncation 32 (the largest rank
                                  group has 27 rows, so neither truncates)
  nthread 1, seed 0            -> num_threads 1, seed 0, deterministic true
Differences that no parameter removes: multi:softprob uses the hessian
2*p*(1-p) while LightGBM's multiclass uses K/(K-1)*p*(1-p); the two libraries
choose bin boundaries differently (XGBoost: weighted quantile sketch over all
rows; LightGBM: its own greedy binning on a sample of at most 200k rows);
LightGBM does not estimate an intercept for multiclass, XGBoost does; the
lambdarank gradient normalisations differ.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd
import xgboost as xgb

SEED = 0
DEFAULT_DATA = Path("/work/shared/data")


# --------------------------------------------------------------------------- data


@dataclass
class Split:
    """A train/test split. X holds float64 with NaN = missing; categorical
    columns hold integer category codes (as floats)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    w_train: np.ndarray | None = None
    w_test: np.ndarray | None = None
    margin_train: np.ndarray | None = None
    margin_test: np.ndarray | None = None
    group_train: np.ndarray | None = None
    group_test: np.ndarray | None = None
    # column index -> list of category labels (code k <-> categories[col][k])
    categories: dict[int, list] = field(default_factory=dict)


def read_libsvm(path: Path, one_based: bool, absent: float, n_features: int | None = None):
    """Dense matrix from LibSVM text. Indices absent from a row get ``absent``."""
    labels, rows, cols, vals = [], [], [], []
    with open(path) as f:
        for i, line in enumerate(f):
            parts = line.split()
            labels.append(float(parts[0]))
            for tok in parts[1:]:
                k, v = tok.split(":")
                rows.append(i)
                cols.append(int(k))
                vals.append(float(v))
    cols = np.asarray(cols, dtype=np.int64) - (1 if one_based else 0)
    if n_features is None:
        n_features = int(cols.max()) + 1
    if cols.size and cols.max() >= n_features:
        raise ValueError(f"{path}: index {cols.max()} beyond {n_features} features")
    X = np.full((len(labels), n_features), absent, dtype=np.float64)
    X[np.asarray(rows), cols] = vals
    return X, np.asarray(labels, dtype=np.float64)


def read_column(path: Path) -> np.ndarray:
    return np.loadtxt(path, dtype=np.float64, ndmin=1)


def read_tsv(path: Path):
    a = np.loadtxt(path, dtype=np.float64, delimiter="\t")
    return a[:, 1:], a[:, 0]


def mod5_split(X, y, categories=None) -> Split:
    """Row i (0-based, file order) is test iff i % 5 == 0."""
    test = np.arange(len(y)) % 5 == 0
    return Split(X[~test], y[~test], X[test], y[test], categories=categories or {})


def encode_strings(col: np.ndarray, missing: str | None = "?"):
    """Category codes for a string column: sorted distinct values over the whole
    column (``missing`` excluded) -> 0..k-1; missing -> NaN."""
    levels = sorted(set(col) - {missing})
    index = {v: i for i, v in enumerate(levels)}
    codes = np.array([index.get(v, np.nan) for v in col], dtype=np.float64)
    return codes, levels


def load_binary(d: Path) -> Split:
    base = d / "lightgbm/binary_classification"
    Xtr, ytr = read_tsv(base / "binary.train")
    Xte, yte = read_tsv(base / "binary.test")
    return Split(Xtr, ytr, Xte, yte,
                 w_train=read_column(base / "binary.train.weight"),
                 w_test=read_column(base / "binary.test.weight"))


def load_regression(d: Path) -> Split:
    base = d / "lightgbm/regression"
    Xtr, ytr = read_tsv(base / "regression.train")
    Xte, yte = read_tsv(base / "regression.test")
    return Split(Xtr, ytr, Xte, yte,
                 margin_train=read_column(base / "regression.train.init"),
                 margin_test=read_column(base / "regression.test.init"))


def load_multiclass(d: Path) -> Split:
    base = d / "lightgbm/multiclass_classification"
    Xtr, ytr = read_tsv(base / "multiclass.train")
    Xte, yte = read_tsv(base / "multiclass.test")
    return Split(Xtr, ytr, Xte, yte)


def load_rank(d: Path) -> Split:
    base = d / "lightgbm/lambdarank"
    Xtr, ytr = read_libsvm(base / "rank.train", one_based=True, absent=np.nan)
    assert Xtr.shape[1] == 300, Xtr.shape
    Xte, yte = read_libsvm(base / "rank.test", one_based=True, absent=np.nan, n_features=Xtr.shape[1])
    gtr = read_column(base / "rank.train.query").astype(np.int64)
    gte = read_column(base / "rank.test.query").astype(np.int64)
    assert gtr.sum() == len(ytr) and gte.sum() == len(yte)
    return Split(Xtr, ytr, Xte, yte, group_train=gtr, group_test=gte)


CATEGORICAL_DATA_CAT_COLS = [0, 1, 4, 5, 6]


def load_categorical(d: Path) -> Split:
    X, y = read_libsvm(d / "lightgbm/categorical/categorical.data", one_based=False,
                       absent=0.0, n_features=8)
    # integer value == category code; categories 0..max over the whole file
    cats = {j: list(range(int(X[:, j].max()) + 1)) for j in CATEGORICAL_DATA_CAT_COLS}
    return mod5_split(X, y, cats)


def load_agaricus(d: Path) -> Split:
    base = d / "xgboost/agaricus"
    Xtr, ytr = read_libsvm(base / "agaricus.txt.train", one_based=True, absent=np.nan)
    assert Xtr.shape[1] == 126, Xtr.shape
    Xte, yte = read_libsvm(base / "agaricus.txt.test", one_based=True, absent=np.nan,
                           n_features=Xtr.shape[1])
    return Split(Xtr, ytr, Xte, yte)


def load_agaricus_lepiota(d: Path) -> Split:
    raw = np.loadtxt(d / "xgboost/agaricus-lepiota/agaricus-lepiota.data", dtype=str, delimiter=",")
    y = (raw[:, 0] == "p").astype(np.float64)
    assert set(raw[:, 0]) == {"p", "e"}
    cols, cats = [], {}
    for j in range(1, raw.shape[1]):
        codes, levels = encode_strings(raw[:, j])
        cols.append(codes)
        cats[j - 1] = levels
    return mod5_split(np.column_stack(cols), y, cats)


def load_machine(d: Path) -> Split:
    raw = np.loadtxt(d / "xgboost/machine/machine.data", dtype=str, delimiter=",")
    vendor, levels = encode_strings(raw[:, 0], missing=None)
    X = np.column_stack([vendor, raw[:, 2:8].astype(np.float64)])  # cols 3..8
    y = np.log(raw[:, 8].astype(np.float64))  # ln(PRP), col 9
    return mod5_split(X, y, {0: levels})


def load_dermatology(d: Path) -> Split:
    raw = np.loadtxt(d / "xgboost/dermatology/dermatology.data", dtype=str, delimiter=",")
    X = np.where(raw[:, :34] == "?", "nan", raw[:, :34]).astype(np.float64)
    y = raw[:, 34].astype(np.float64) - 1
    return mod5_split(X, y)


# --------------------------------------------------------------------------- metrics


def metric_auc(y, score, w=None) -> float:
    """Weighted ROC AUC = P(score_pos > score_neg) + 0.5 P(tie), pairs weighted
    by w_pos * w_neg. Tied scores count one half."""
    y = np.asarray(y)
    w = np.ones_like(score, dtype=np.float64) if w is None else np.asarray(w, dtype=np.float64)
    uniq, inv = np.unique(score, return_inverse=True)  # tie groups, ascending score
    pos = np.bincount(inv, weights=w * (y == 1), minlength=len(uniq))
    neg = np.bincount(inv, weights=w * (y == 0), minlength=len(uniq))
    neg_below = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_below + 0.5 * neg)) / (pos.sum() * neg.sum()))


def metric_logloss(y, p, w=None, eps=1e-15) -> float:
    """Weighted binary cross-entropy: -sum w (y ln p + (1-y) ln(1-p)) / sum w, p clipped to [eps, 1-eps]."""
    w = np.ones_like(p) if w is None else w
    p = np.clip(p, eps, 1 - eps)
    return float(-np.sum(w * (y * np.log(p) + (1 - y) * np.log(1 - p))) / np.sum(w))


def metric_error(y, p, w=None) -> float:
    """Weighted error rate, predicted class = 1 iff p > 0.5."""
    w = np.ones_like(p) if w is None else w
    return float(np.sum(w * ((p > 0.5) != (y == 1))) / np.sum(w))


def metric_rmse(y, pred) -> float:
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def metric_mlogloss(y, prob, eps=1e-15) -> float:
    """-mean ln prob[i, y_i], prob clipped to [eps, 1-eps]."""
    p = np.clip(prob[np.arange(len(y)), y.astype(np.int64)], eps, 1 - eps)
    return float(-np.mean(np.log(p)))


def metric_merror(y, prob) -> float:
    """Fraction of rows whose argmax class (lowest index on ties) is not the label."""
    return float(np.mean(np.argmax(prob, axis=1) != y.astype(np.int64)))


def metric_ndcg(y, score, groups, k=10) -> float:
    """Mean over query groups of NDCG@k with gain 2^rel - 1 and discount
    1/log2(rank + 1) (rank 1-based). Rows are ranked by descending score, ties
    kept in file order (stable sort). A group whose ideal DCG is 0 counts 1."""
    out, start = [], 0
    for n in groups:
        rel, s = y[start:start + n], score[start:start + n]
        start += n
        disc = 1.0 / np.log2(np.arange(2, min(k, n) + 2))
        dcg = np.sum((2.0 ** rel[np.argsort(-s, kind="stable")][:k] - 1) * disc)
        idcg = np.sum((2.0 ** np.sort(rel)[::-1][:k] - 1) * disc)
        out.append(1.0 if idcg == 0 else dcg / idcg)
    return float(np.mean(out))


# --------------------------------------------------------------------------- training


@dataclass
class Case:
    name: str
    load: callable
    objective: str  # XGBoost objective name
    rounds: int
    max_depth: int
    num_class: int = 0


CASES = [
    Case("binary_classification", load_binary, "binary:logistic", 100, 6),
    Case("regression (+init)", load_regression, "reg:squarederror", 100, 6),
    Case("multiclass", load_multiclass, "multi:softprob", 100, 6, num_class=5),
    Case("lambdarank", load_rank, "rank:ndcg", 100, 6),
    Case("categorical", load_categorical, "binary:logistic", 100, 6),
    Case("agaricus", load_agaricus, "binary:logistic", 20, 6),
    Case("agaricus-lepiota", load_agaricus_lepiota, "binary:logistic", 20, 6),
    Case("machine (ln PRP)", load_machine, "reg:squarederror", 100, 4),
    Case("dermatology", load_dermatology, "multi:softprob", 50, 4, num_class=6),
]

LGB_OBJECTIVE = {
    "binary:logistic": "binary",
    "reg:squarederror": "regression",
    "multi:softprob": "multiclass",
    "rank:ndcg": "lambdarank",
}

RANK_TRUNCATION = 32  # XGBoost's default for lambdarank_pair_method="topk"


def xgb_params(case: Case) -> dict:
    p = {
        "objective": case.objective,
        "tree_method": "hist",
        "grow_policy": "depthwise",
        "max_depth": case.max_depth,
        "eta": 0.1,
        "max_bin": 256,
        "lambda": 1.0,
        "alpha": 0.0,
        "gamma": 0.0,
        "min_child_weight": 1.0,
        "subsample": 1.0,
        "colsample_bytree": 1.0,
        "max_cat_to_onehot": 4,
        "max_cat_threshold": 64,
        "nthread": 1,
        "seed": SEED,
    }
    if case.num_class:
        p["num_class"] = case.num_class
    if case.objective == "rank:ndcg":
        p.update(lambdarank_pair_method="topk", lambdarank_num_pair_per_sample=RANK_TRUNCATION,
                 ndcg_exp_gain=True, eval_metric="ndcg@10")
    return p


LGB_MAX_BIN = 255  # set from --lgb-max-bin


def lgb_params(case: Case) -> dict:
    p = {
        "objective": LGB_OBJECTIVE[case.objective],
        "boosting": "gbdt",
        "learning_rate": 0.1,
        "max_depth": case.max_depth,
        "num_leaves": 2 ** case.max_depth,
        "max_bin": LGB_MAX_BIN,
        "min_data_in_bin": 1,
        "lambda_l2": 1.0,
        "lambda_l1": 0.0,
        "min_gain_to_split": 0.0,
        "min_sum_hessian_in_leaf": 1.0,
        "min_data_in_leaf": 1,
        "bagging_fraction": 1.0,
        "bagging_freq": 0,
        "feature_fraction": 1.0,
        "max_cat_to_onehot": 4,
        "max_cat_threshold": 64,
        "cat_smooth": 1.0,
        "cat_l2": 0.0,
        "min_data_per_group": 1,
        "use_missing": True,
        "zero_as_missing": False,
        "num_threads": 1,
        "seed": SEED,
        "deterministic": True,
        "force_col_wise": True,
        "verbose": -1,
    }
    if case.num_class:
        p["num_class"] = case.num_class
    if case.objective == "rank:ndcg":
        p.update(lambdarank_truncation_level=RANK_TRUNCATION, metric="ndcg", eval_at=[10])
    return p


def to_xgb_frame(X: np.ndarray, categories: dict[int, list]):
    """numpy codes -> DataFrame with pandas category columns for XGBoost."""
    if not categories:
        return X
    df = {}
    for j in range(X.shape[1]):
        if j in categories:
            codes = np.where(np.isnan(X[:, j]), -1, X[:, j]).astype(np.int64)
            df[f"f{j}"] = pd.Categorical.from_codes(codes, categories=categories[j])
        else:
            df[f"f{j}"] = X[:, j]
    return pd.DataFrame(df)


def train_xgb(case: Case, s: Split):
    """Returns (test predictions: probabilities / values / scores, extra info)."""
    def dmat(X, y, w, margin, group):
        d = xgb.DMatrix(to_xgb_frame(X, s.categories), label=y, weight=w, base_margin=margin,
                        enable_categorical=bool(s.categories), missing=np.nan)
        if group is not None:
            d.set_group(group)
        return d

    dtrain = dmat(s.X_train, s.y_train, s.w_train, s.margin_train, s.group_train)
    dtest = dmat(s.X_test, s.y_test, s.w_test, s.margin_test, s.group_test)
    evals_result: dict = {}
    evals = [(dtest, "test")] if case.objective == "rank:ndcg" else []
    bst = xgb.train(xgb_params(case), dtrain, num_boost_round=case.rounds, evals=evals,
                    evals_result=evals_result, verbose_eval=False)
    pred = bst.predict(dtest)  # includes base_margin of dtest
    cfg = json.loads(bst.save_config())
    info = {"base_score": cfg["learner"]["learner_model_param"]["base_score"]}
    if evals_result:
        info["reported"] = evals_result["test"]["ndcg@10"][-1]
    return pred, info


def train_lgb(case: Case, s: Split):
    cat = sorted(s.categories) or "auto"
    params = lgb_params(case)
    dtrain = lgb.Dataset(s.X_train, label=s.y_train, weight=s.w_train, init_score=s.margin_train,
                         group=s.group_train, categorical_feature=cat, params=params,
                         free_raw_data=False)
    evals_result: dict = {}
    valid = []
    if case.objective == "rank:ndcg":
        valid = [lgb.Dataset(s.X_test, label=s.y_test, group=s.group_test, reference=dtrain,
                             categorical_feature=cat, params=params)]
    bst = lgb.train(params, dtrain, num_boost_round=case.rounds, valid_sets=valid,
                    valid_names=["test"] if valid else None,
                    callbacks=[lgb.record_evaluation(evals_result)] if valid else None)
    pred = bst.predict(s.X_test)
    if s.margin_test is not None:  # identity link: add the init score back
        pred = pred + s.margin_test
    info = {}
    if evals_result:
        info["reported"] = evals_result["test"]["ndcg@10"][-1]
    return pred, info


def evaluate(case: Case, s: Split, pred) -> list[tuple[str, float]]:
    y, w = s.y_test, s.w_test
    name = case.name
    if case.objective == "binary:logistic":
        if name.startswith("agaricus-lepiota"):
            return [("error", metric_error(y, pred, w)), ("auc", metric_auc(y, pred, w))]
        if name.startswith("agaricus"):
            return [("error", metric_error(y, pred, w))]
        if name.startswith("categorical"):
            return [("auc", metric_auc(y, pred, w))]
        return [("auc (weighted)", metric_auc(y, pred, w)),
                ("logloss (weighted)", metric_logloss(y, pred, w))]
    if case.objective == "reg:squarederror":
        return [("rmse", metric_rmse(y, pred))]
    if case.objective == "multi:softprob":
        return [("mlogloss", metric_mlogloss(y, pred)), ("merror", metric_merror(y, pred))]
    if case.objective == "rank:ndcg":
        return [("ndcg@10", metric_ndcg(y, pred, s.group_test, 10))]
    raise ValueError(case.objective)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    ap.add_argument("--lgb-max-bin", type=int, default=255,
                    help="LightGBM max_bin (default 255; XGBoost always gets 256)")
    args = ap.parse_args()
    global LGB_MAX_BIN
    LGB_MAX_BIN = args.lgb_max_bin

    print(f"command: {' '.join(['python'] + sys.argv)}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}, "
          f"xgboost {xgb.__version__}, lightgbm {lgb.__version__}")
    print(f"machine: {platform.machine()}, {platform.processor() or platform.platform()}")
    print(f"nproc: {os.cpu_count()}; threads used: 1, seed: 0; "
          f"max_bin: xgboost 256, lightgbm {LGB_MAX_BIN}\n")

    rows, notes = [], []
    for case in CASES:
        s = case.load(args.data)
        px, ix = train_xgb(case, s)
        pl, il = train_lgb(case, s)
        mx, ml = evaluate(case, s, px), evaluate(case, s, pl)
        for (metric, vx), (_, vl) in zip(mx, ml):
            rows.append((case.name, case.objective, metric, vx, vl))
        notes.append(f"{case.name}: train {s.X_train.shape}, test {s.X_test.shape}, "
                     f"xgboost base_score {ix['base_score']}"
                     + (" (unused: a base margin replaces it)" if s.margin_train is not None else ""))
        if "reported" in ix:
            notes.append(f"{case.name}: ndcg@10 as the libraries report it: "
                         f"xgboost {ix['reported']:.6f}, lightgbm {il['reported']:.6f}")

    print("| dataset | objective | metric | xgboost | lightgbm |")
    print("|---|---|---|---:|---:|")
    for name, obj, metric, vx, vl in rows:
        print(f"| {name} | {obj} | {metric} | {vx:.6f} | {vl:.6f} |")
    print()
    for n in notes:
        print(f"- {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
