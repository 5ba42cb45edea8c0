"""The exceptions of polars-gbt.

Every error of the Rust core is one of these when it reaches Python through
``polars_gbt.train``, ``polars_gbt.Model`` or the scikit-learn estimators; each message names
the parameter, column or file at fault. A hand-written ``gbt.fit`` expression raises a
``ParameterError`` when it is built; errors that depend on the data come when its query runs,
and Polars raises those itself, as ``polars.exceptions.ComputeError`` with our message, unless
the query runs inside ``with polars_gbt.translate_errors():``, which re-raises them as these.

Examples
--------
>>> import polars as pl, polars_gbt
>>> df = pl.DataFrame({"a": [1.0, 2.0] * 10, "y": [0.0, 1.0] * 10})
>>> try:
...     polars_gbt.train(df, target="y", max_dpeth=3)
... except polars_gbt.ParameterError as e:
...     print(type(e).__name__, str(e).startswith("invalid parameter `max_dpeth`"))
ParameterError True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import polars as pl


class GbtError(Exception):
    """Base class of every error polars-gbt raises."""


class ParameterError(GbtError, ValueError):
    """A training parameter is unknown, mistyped, or out of range."""


class ColumnError(GbtError, ValueError):
    """A feature, label, weight or group column cannot be used as given."""


class DataError(GbtError, ValueError):
    """The data as a whole cannot be used (empty, mismatched lengths, nothing to split on)."""


class ModelError(GbtError, ValueError):
    """A model file or its bytes are corrupt, truncated or inconsistent."""


class ModelVersionError(ModelError):
    """A model was written by a newer version of the format."""


class DeviceError(GbtError, RuntimeError):
    """The requested device cannot be used (no GPU, no NVRTC, out of GPU memory, ...)."""


class DistributedError(GbtError, RuntimeError):
    """The workers of a distributed fit could not work together: one stopped, did not answer
    within the timeout, or could not be reached. The message names the worker."""


class FileError(GbtError, OSError):
    """Reading or writing a model file failed."""


class InternalError(GbtError, RuntimeError):
    """A bug in polars-gbt: the Rust code panicked. The message carries the panic's; please
    report it. (Bad input is always one of the other classes, never this one.)"""


# How the Rust errors' messages begin (src/error.rs), in the order to try them.
_KINDS: list[tuple[str, type[GbtError]]] = [
    ("invalid parameter `", ParameterError),
    ("column `", ColumnError),
    ("invalid data: ", DataError),
    ("invalid model: ", ModelError),
    ("model format version ", ModelVersionError),
    ("device: ", DeviceError),
    ("distributed fit: ", DistributedError),
    ("i/o: ", FileError),
    ("internal error (a bug in polars-gbt", InternalError),
]


def _classify(message: str) -> tuple[type[GbtError], str] | None:
    # Polars may put its own words before a plugin's message: find ours within.
    found = [(message.find(prefix), cls) for prefix, cls in _KINDS if prefix in message]
    if not found:
        return None
    at, cls = min(found, key=lambda f: f[0])
    # Polars may also append the failing expression, which names our plugin's internals.
    ours = message[at:].split("\nThis error occurred in the following expression")[0]
    return cls, ours.strip()


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raises polars-gbt's errors (also those Polars raises for the plugin, as
    ``ComputeError``) as the matching ``GbtError`` subclass, the original chained; an
    exception that a user's objective or metric raised is raised itself, its type and
    traceback kept.

    Public as ``polars_gbt.translate_errors``, for hand-written queries.

    Examples
    --------
    >>> import polars as pl, polars_gbt
    >>> df = pl.DataFrame({"a": [1.0, 2.0] * 10, "y": [0.0, 3.0] * 10})
    >>> try:
    ...     with polars_gbt.translate_errors():
    ...         df.select(pl.col("a").gbt.fit("y", objective="binary:logistic"))
    ... except polars_gbt.ColumnError as e:
    ...     print(str(e).split(":")[0])
    column `y`
    """
    try:
        yield
    except (pl.exceptions.ComputeError, ValueError, OSError, RuntimeError) as e:
        if isinstance(e, GbtError):
            raise
        from polars_gbt._custom import raised_by_user

        # An exception of the user's objective or metric stopped the fit: raise it, with its
        # own type and traceback (`except MyError:` catches it), rather than the fit's error.
        user = raised_by_user(str(e))
        if user is not None:
            raise user from None
        kind = _classify(str(e))
        if kind is None:
            raise
        cls, message = kind
        raise cls(message) from e
