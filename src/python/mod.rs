//! The Polars expression plugin and the Python module `polars_gbt._internal` (feature
//! `python`). Everything here is thin: convert Polars inputs to the crate's Arrow column
//! views, call the crate, and turn every `Error` into a Polars error (a Python exception),
//! never a panic.

mod convert;
mod expressions;
mod module;
