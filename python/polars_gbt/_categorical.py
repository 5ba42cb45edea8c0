"""A frame's ``Categorical`` features handed to the plugin as their ids (issue 61).

Handing a ``Categorical`` column to a plugin, Polars exports it row by row (a fresh hash set a
chunk renumbers every row to list only the categories present): on 5.5M rows of six such
columns, 0.4 s, more than a whole one-tree fit of their ``Enum`` twins. A frame in memory can
hand each one over as its physical ids (``to_physical``, no copy) and its categories' names in
id order (the dtype's ``Categories``, listed once); the plugin reads the ids through one table
of the ids present, as it reads a ``Categorical``: the same model, the same scores.

Only for frames in memory: every id of their rows has its name already, where a lazy query
may add categories while it runs.
"""

from __future__ import annotations

import polars as pl


def as_ids(frame: pl.DataFrame, features: list[str]) -> tuple[pl.DataFrame, dict[str, list[str]]]:
    """``frame`` with its ``Categorical`` columns among ``features`` as their ids, and each
    such column's category names in id order (empty when it has none)."""
    schema = frame.schema
    names = {f: schema[f].categories.to_series().to_list() for f in features if isinstance(schema.get(f), pl.Categorical)}
    if not names:
        return frame, names
    return frame.with_columns(pl.col(list(names)).to_physical()), names
