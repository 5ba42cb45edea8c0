"""Inputs that Polars does not take as they are: pandas sparse columns and scipy sparse
matrices, made into the columns the plugin reads.

Both become dense columns: a sparse matrix's absent entries take a value slot each (a null,
or a zero), so a frame of ``n`` rows and ``m`` columns takes ``8 * n * m`` bytes (plus a
validity bit per slot for nulls), whatever the matrix's density. A native sparse column kind
is later work.
"""

from __future__ import annotations

import sys
from typing import Any

import polars as pl

ABSENT = ("missing", "zero")


def is_scipy_sparse(X: Any) -> bool:
    """Whether ``X`` is a scipy sparse matrix or array (any format)."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(X)


def dense_pandas(df: Any) -> Any:
    """A pandas frame with its sparse columns (``SparseDtype``) made dense, as XGBoost reads
    them: each entry its value, the fill value included (a NaN fill is missing); ``df``
    itself when it has none. Polars (through pyarrow) cannot read sparse columns."""
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(df, pd.DataFrame):
        return df
    sparse = [c for c, dtype in df.dtypes.items() if isinstance(dtype, pd.SparseDtype)]
    if not sparse:
        return df
    out = df.copy(deep=False)
    for c in sparse:
        out[c] = df[c].sparse.to_dense()
    return out


def sparse_frame(X: Any, names: list[str] | None = None, absent: str = "missing") -> pl.DataFrame:
    """A scipy sparse matrix (CSR, CSC or any other format) as a frame of Float64 columns
    named ``names`` (default ``f0``, ``f1``, ...), for ``polars_gbt.train``, ``cv`` and the
    expressions, as the estimators read one. ``absent="missing"`` (XGBoost's reading) makes
    the entries the matrix does not store nulls, which the model treats as missing;
    ``"zero"`` (LightGBM's) makes them 0.0. Stored entries keep their values (a stored NaN is
    missing either way). The frame is dense: ``8 * rows * columns`` bytes (and a validity bit
    per value with nulls), whatever the matrix's density.

    Examples
    --------
    >>> import scipy.sparse as sp, polars_gbt
    >>> m = sp.csr_matrix([[1.0, 0.0], [0.0, 2.0]])
    >>> polars_gbt.sparse_frame(m, ["a", "b"]).rows()
    [(1.0, None), (None, 2.0)]
    >>> polars_gbt.sparse_frame(m, absent="zero").rows()
    [(1.0, 0.0), (0.0, 2.0)]
    """
    import numpy as np

    if not is_scipy_sparse(X):
        raise TypeError(f"sparse_frame takes a scipy sparse matrix or array, not {type(X).__name__}")
    if names is None:
        names = [f"f{j}" for j in range(X.shape[1])]

    if absent not in ABSENT:
        raise ValueError(f"sparse_absent must be one of {', '.join(map(repr, ABSENT))}, not {absent!r}")
    if X.ndim != 2:
        raise ValueError(f"a sparse X must be 2-D, not {X.ndim}-D")
    names = list(names)
    csc = X.tocsc()
    csc.sum_duplicates()
    n, m = csc.shape
    if len(names) != m:
        raise ValueError(f"X has {m} features, but {len(names)} names")
    fill = 0.0 if absent == "zero" else np.nan
    columns = []
    for j in range(m):
        lo, hi = csc.indptr[j], csc.indptr[j + 1]
        values = np.full(n, fill, dtype=np.float64)
        values[csc.indices[lo:hi]] = csc.data[lo:hi]
        # NaN, absent or stored, is missing: as a null, as the frames' missing values are.
        columns.append(pl.Series(names[j], values, dtype=pl.Float64, nan_to_null=True))
    return pl.DataFrame(columns)
