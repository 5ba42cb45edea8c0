"""Gradient-boosted decision trees as Polars expressions.

Importing the package registers the ``gbt`` expression namespace::

    import polars as pl
    import polars_gbt  # noqa: F401  (registers pl.Expr.gbt)

    df = pl.DataFrame({"x": [0.1, 0.4, 0.8, 0.9] * 50, "y": [0, 0, 1, 1] * 50})
    model = df.select(pl.col("x").gbt.fit(pl.col("y"), objective="binary:logistic", n_estimators=5)).item()
    scored = df.with_columns(p=pl.col("x").gbt.predict(model))
"""

import importlib.util as _importlib_util
import os as _os


def _point_at_pip_libraries() -> None:
    # The CUDA backend compiles its kernels with NVRTC, and several GPUs (n_gpus=) sum their
    # histograms through NCCL. pip puts them in the nvidia-cuda-nvrtc and nvidia-nccl-cu13
    # wheels, outside the loader's search path: tell the Rust side where, before anything
    # loads them.
    spec = _importlib_util.find_spec("nvidia")
    bases = list(spec.submodule_search_locations or []) if spec else []
    for variable, subdirs in (
        ("POLARS_GBT_NVRTC_DIRS", ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib")),
        ("POLARS_GBT_NCCL_DIRS", ("nccl/lib", "cu13/lib")),
    ):
        dirs = [
            _os.path.join(base, sub)
            for base in bases
            for sub in subdirs
            if _os.path.isdir(_os.path.join(base, sub))
        ]
        if dirs:
            _os.environ.setdefault(variable, _os.pathsep.join(dirs))


_point_at_pip_libraries()

from polars_gbt._errors import (  # noqa: E402
    ColumnError,
    DataError,
    DeviceError,
    DistributedError,
    FileError,
    GbtError,
    InternalError,
    ModelError,
    ModelVersionError,
    ParameterError,
)
from polars_gbt._cv import cv  # noqa: E402
from polars_gbt._inputs import sparse_frame  # noqa: E402
from polars_gbt._errors import translated as translate_errors  # noqa: E402
from polars_gbt._model import Model, train  # noqa: E402
from polars_gbt._namespace import GbtNamespace  # noqa: E402
from polars_gbt._plot import plot_contributions, plot_importance, plot_metric  # noqa: E402

__all__ = [
    "ColumnError",
    "DataError",
    "DeviceError",
    "DistributedError",
    "FileError",
    "GbtError",
    "InternalError",
    "ModelError",
    "ModelVersionError",
    "ParameterError",
    "cuda_available",
    "cv",
    "sparse_frame",
    "translate_errors",
    "GBTClassifier", "GBTRanker", "GBTRegressor", "GbtNamespace", "Model", "plot_contributions", "plot_importance", "plot_metric", "train"]


def cuda_available() -> bool:
    """Whether ``device="cuda"`` can train here: an NVIDIA driver, a GPU and NVRTC.

    The first call starts the CUDA runtime (about a second); ``device="auto"`` makes the
    same check and falls back to the CPU, saying why when ``verbose`` is set.

    Examples
    --------
    >>> import polars_gbt
    >>> isinstance(polars_gbt.cuda_available(), bool)
    True
    """
    from polars_gbt._internal import cuda_unavailable_reason

    return cuda_unavailable_reason() is None


def __getattr__(name: str):
    # The scikit-learn estimators load on first use, so scikit-learn stays optional.
    if name in ("GBTClassifier", "GBTRegressor", "GBTRanker"):
        from polars_gbt import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'polars_gbt' has no attribute {name!r}")
