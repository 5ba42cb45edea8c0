//! The plugin entry points of `gbt.predict`, written out by hand instead of by
//! `#[polars_expr]`, for one reason: the macro unpickles the keyword arguments on every call,
//! and a constant model's bytes travel in them. A streaming query calls once per batch, so a
//! 7 MB model was copied out of the pickle some 40 times for 4M rows (about 0.3 ms a batch,
//! most of the gap between streaming and eager scoring).
//!
//! Here the kwargs are unpickled once per distinct expression. The model's bytes are found in
//! place in the pickle (the model format's magic behind a `BYTEARRAY8` opcode), and everything
//! around them, which holds the model's digest and every other argument, is the key of the
//! parsed arguments. A later batch matches that key and reads the model, if it needs it at
//! all, straight from the pickle. Any pickle that does not have that shape (a model column, a
//! JSON model) is unpickled in full, as the macro would.
//!
//! The two functions follow what pyo3-polars' macro generates for its version in Cargo.lock,
//! through the bodies every entry point shares (`abi.rs`: the FFI types, error channel and
//! panic marker, and the inputs' import).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use polars::prelude::PolarsResult;
use pyo3_polars::export::polars_ffi::version_0::{CallerContext, SeriesExport};

use super::abi::{kwargs_bytes, run_expression, run_field};

use super::predict::{predict, predict_field, PredictKwargs};

/// The first bytes of every binary model (src/model/format.rs).
const MODEL_MAGIC: &[u8; 8] = b"PLGBTMDL";
/// Pickle's opcode for a bytearray with a u64 length (protocol 5, what Polars writes).
const BYTEARRAY8: u8 = 0x96;
/// Distinct `gbt.predict` expressions whose arguments are kept; past it the table starts over.
const MAX_EXPRESSIONS: usize = 256;

/// Where the model's bytes lie in the pickled kwargs `raw`: the magic, behind the opcode and
/// its length, the length reaching no further than `raw`.
fn locate_model(raw: &[u8]) -> Option<Range<usize>> {
    let at = raw.windows(MODEL_MAGIC.len()).position(|w| w == MODEL_MAGIC)?;
    let header = at.checked_sub(9)?;
    if raw[header] != BYTEARRAY8 {
        return None;
    }
    let len = u64::from_le_bytes(raw[header + 1..at].try_into().ok()?);
    let end = at.checked_add(usize::try_from(len).ok()?)?;
    (end <= raw.len()).then_some(at..end)
}

/// Parsed arguments by the pickle's bytes around the model (opcode, length and model left out).
fn parsed() -> std::sync::MutexGuard<'static, HashMap<Vec<u8>, Arc<PredictKwargs>>> {
    static PARSED: OnceLock<Mutex<HashMap<Vec<u8>, Arc<PredictKwargs>>>> = OnceLock::new();
    PARSED.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

fn unpickle(raw: &[u8]) -> PolarsResult<PredictKwargs> {
    pyo3_polars::derive::_parse_kwargs(raw)
}

/// Runs `work` on the call's arguments and a constant model's bytes (empty with a model column).
fn with_kwargs<T>(raw: &[u8], work: impl FnOnce(&PredictKwargs, &[u8]) -> PolarsResult<T>) -> PolarsResult<T> {
    let Some(model) = locate_model(raw) else {
        let kwargs = unpickle(raw)?;
        return work(&kwargs, &kwargs.model);
    };
    let key = [&raw[..model.start - 9], &raw[model.end..]].concat();
    let known = parsed().get(&key).cloned();
    let kwargs = match known {
        Some(kwargs) => kwargs,
        None => {
            let mut kwargs = unpickle(raw)?;
            if kwargs.model != raw[model.clone()] {
                // Not the model's bytes after all (some other argument held the magic).
                return work(&kwargs, &kwargs.model);
            }
            kwargs.model = Vec::new();
            let kwargs = Arc::new(kwargs);
            let mut table = parsed();
            if table.len() >= MAX_EXPRESSIONS {
                table.clear();
            }
            table.insert(key, kwargs.clone());
            kwargs
        }
    };
    work(&kwargs, &raw[model])
}

/// `gbt.predict` on one batch.
///
/// # Safety
/// Called by Polars through the plugin interface, with pointers valid for the call.
#[no_mangle]
pub unsafe extern "C" fn _polars_plugin_gbt_predict(
    series: *mut SeriesExport,
    n_series: usize,
    kwargs_ptr: *const u8,
    kwargs_len: usize,
    return_value: *mut SeriesExport,
    _context: *mut CallerContext,
) {
    run_expression(series, n_series, return_value, |inputs| {
        with_kwargs(kwargs_bytes(kwargs_ptr, kwargs_len), |kwargs, model| predict(inputs, kwargs, model))
    })
}

/// The output field of `gbt.predict`, asked for when the query is planned.
///
/// # Safety
/// As [`_polars_plugin_gbt_predict`].
#[no_mangle]
pub unsafe extern "C" fn _polars_plugin_field_gbt_predict(
    fields: *mut polars_arrow::ffi::ArrowSchema,
    n_fields: usize,
    return_value: *mut polars_arrow::ffi::ArrowSchema,
    kwargs_ptr: *const u8,
    kwargs_len: usize,
) {
    run_field(fields, n_fields, return_value, |fields| {
        with_kwargs(kwargs_bytes(kwargs_ptr, kwargs_len), |kwargs, model| predict_field(fields, kwargs, model))
    })
}
