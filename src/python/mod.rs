//! The Polars expression plugin and the Python module `polars_gbt._internal` (feature
//! `python`). Everything here is thin: convert Polars inputs to the crate's Arrow column
//! views, call the crate, and turn every `Error` into a Polars error (a Python exception),
//! never a panic.

mod abi;
mod convert;
mod custom;
mod device;
mod dtypes;
mod fit;
mod inputs;
mod interrupt;
mod kwargs;
mod model_cache;
mod module;
mod predict;
mod predict_abi;
mod progress;
mod stream;

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::panic_message;

/// The start of every message about a panic caught at an entry point (python/polars_gbt/
/// _errors.py raises `polars_gbt.InternalError` for it).
const BUG: &str = "internal error (a bug in polars-gbt; please report it)";

/// Runs a plugin entry point; a panic (a bug: bad input is an `Error`, never a panic) becomes
/// a Polars error that says so and carries the panic's message, instead of Polars' bare
/// "the plugin panicked".
fn catch_panics<T>(work: impl FnOnce() -> polars::prelude::PolarsResult<T>) -> polars::prelude::PolarsResult<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        Err(polars::prelude::PolarsError::ComputeError(format!("{BUG}: {}", panic_message(payload)).into()))
    })
}

/// The crate's error as a Polars error: Python sees `polars.exceptions.ComputeError` with
/// the message, which names the parameter or column at fault.
fn to_polars(e: crate::Error) -> polars::prelude::PolarsError {
    polars::prelude::PolarsError::ComputeError(e.to_string().into())
}

/// [`catch_panics`] for the functions of the Python module: the panic as a RuntimeError.
fn catch_panics_py<T>(work: impl FnOnce() -> pyo3::PyResult<T>) -> pyo3::PyResult<T> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        Err(pyo3::exceptions::PyRuntimeError::new_err(format!("{BUG}: {}", panic_message(payload))))
    })
}
