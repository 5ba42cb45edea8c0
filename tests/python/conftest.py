"""Shared fixtures: LightGBM's Higgs-derived binary data from ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

# ../shared/data beside the checkout, as in CI; POLARS_GBT_TEST_DATA points elsewhere (the GPU
# machine, which gets only the checkout).
DATA = Path(os.environ.get("POLARS_GBT_TEST_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")) / "lightgbm"
FEATURES = [f"f{i}" for i in range(28)]


def load(path: Path) -> pl.DataFrame:
    """A LightGBM example file: label ``y`` then features ``f0..``."""
    df = pl.read_csv(path, separator="\t", has_header=False)
    return df.rename({c: ("y" if i == 0 else f"f{i - 1}") for i, c in enumerate(df.columns)})


@pytest.fixture(scope="session")
def train_df() -> pl.DataFrame:
    return load(DATA / "binary_classification" / "binary.train")


@pytest.fixture(scope="session")
def test_df() -> pl.DataFrame:
    return load(DATA / "binary_classification" / "binary.test")
