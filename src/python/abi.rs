//! The plugin interface's entry points, as pyo3-polars' `#[polars_expr]` writes them
//! ([`plugin_expression!`]), but importing their input Series ([`import_inputs`]) as
//! pyo3-polars does except for `Enum` columns.
//!
//! Why `Enum` columns differ: polars-core rebuilds an imported `Enum` or `Categorical` column
//! by interning every row's string (`import_arrow_dictionary_array`): 2M rows of 10 `Enum`
//! columns cost about 0.4 s before any work. An `Enum`'s codes are already positions in its categories, which
//! travel in its dtype, so they are taken as they come, once the column's dictionary is seen
//! to hold exactly the dtype's categories, in order. A `Categorical` column's codes belong to
//! the sending process's registry: its dictionary's values are entered in this process's
//! registry once each, and the codes translated through that table (when the dictionary is
//! no longer than the column; else polars-core's import, which enters the rows' values).

use std::cell::Cell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime};

use polars::prelude::*;
use polars_arrow::array::{Array, DictionaryArray, DictionaryKey, PrimitiveArray, Utf8ViewArray};
use polars_arrow::ffi::{ArrowArray, ArrowSchema};
use pyo3_polars::export::polars_ffi::version_0::{export_series, import_series, SeriesExport};

/// `SeriesExport`'s fields (private in polars-ffi): the C struct of the plugin interface.
#[repr(C)]
struct ExportFields {
    field: *mut ArrowSchema,
    arrays: *mut *mut ArrowArray,
    len: usize,
    release: Option<unsafe extern "C" fn(*mut SeriesExport)>,
    private_data: *mut c_void,
}

const _: () = assert!(std::mem::size_of::<ExportFields>() == std::mem::size_of::<SeriesExport>());

/// The `n` Series Polars exported at `exports`, taking ownership of them.
///
/// # Safety
/// `exports` points to `n` valid exports, which no one else imports.
pub unsafe fn import_inputs(exports: *mut SeriesExport, n: usize) -> PolarsResult<Vec<Series>> {
    (0..n).map(|i| import_one(std::ptr::read(exports.add(i)))).collect()
}

/// One export as a Series (see the module's comment). Dropping the export releases it.
unsafe fn import_one(export: SeriesExport) -> PolarsResult<Series> {
    let fields = &*(&export as *const SeriesExport as *const ExportFields);
    let field = polars_arrow::ffi::import_field_from_c(&*fields.field)?;
    let dtype = DataType::from_arrow_field(&field);
    if !matches!(dtype, DataType::Enum(..) | DataType::Categorical(..)) {
        return import_series(export);
    }
    let pointers = std::slice::from_raw_parts(fields.arrays, fields.len);
    // Each array is moved out of its slot; the export's release then frees only the slots.
    let chunks = pointers
        .iter()
        .map(|p| polars_arrow::ffi::import_array_from_c(std::ptr::read(*p), field.dtype().clone()))
        .collect::<PolarsResult<Vec<_>>>()?;
    drop(export);
    let fast = match dtype {
        DataType::Enum(..) => enum_from_codes(field.name.clone(), &dtype, &chunks),
        _ => categorical_by_dictionary(field.name.clone(), &dtype, &chunks),
    };
    match fast {
        Some(s) => Ok(s),
        // Rebuilt row by row, as polars-core would.
        None => Series::_try_from_arrow_unchecked_with_md(
            field.name.clone(),
            chunks,
            field.dtype(),
            field.metadata.as_deref(),
        ),
    }
}

/// The `dtype` Series named `name` over the codes `$codes::<K>(args)` makes, `K` the dtype's
/// physical width (8, 16 or 32 bits); None when it makes none or the dtype has no width.
/// `$codes` gives only codes of the dtype's categories (on its non-null rows), so they are
/// not looked up again row by row (`from_cats_and_dtype` does: a third of an import's time).
macro_rules! with_codes {
    ($dtype:expr, $name:expr, $codes:ident($($arg:expr),*)) => {{
        let dtype: &DataType = $dtype;
        // SAFETY (each arm): `$codes` checked every non-null code names a category of `dtype`.
        Some(match dtype.cat_physical().ok()? {
            CategoricalPhysical::U8 => {
                let ca = UInt8Chunked::from_chunk_iter($name, $codes::<u8>($($arg),*)?);
                unsafe { CategoricalChunked::<Categorical8Type>::from_cats_and_dtype_unchecked(ca, dtype.clone()) }
                    .into_series()
            }
            CategoricalPhysical::U16 => {
                let ca = UInt16Chunked::from_chunk_iter($name, $codes::<u16>($($arg),*)?);
                unsafe { CategoricalChunked::<Categorical16Type>::from_cats_and_dtype_unchecked(ca, dtype.clone()) }
                    .into_series()
            }
            CategoricalPhysical::U32 => {
                let ca = UInt32Chunked::from_chunk_iter($name, $codes::<u32>($($arg),*)?);
                unsafe { CategoricalChunked::<Categorical32Type>::from_cats_and_dtype_unchecked(ca, dtype.clone()) }
                    .into_series()
            }
        })
    }};
}

/// A `Categorical` Series from dictionary chunks: each dictionary value entered once in
/// this process's registry (the dtype's mapping), each code translated through the table.
/// None when a dictionary is longer than its chunk, holds a null, or a new code does not fit
/// the dtype's physical width.
fn categorical_by_dictionary(name: PlSmallStr, dtype: &DataType, chunks: &[Box<dyn Array>]) -> Option<Series> {
    let DataType::Categorical(_, mapping) = dtype else { return None };
    fn translate<K: DictionaryKey + TryFrom<CatSize>>(
        chunks: &[Box<dyn Array>],
        mapping: &CategoricalMapping,
    ) -> Option<Vec<PrimitiveArray<K>>> {
        chunks
            .iter()
            .map(|c| {
                let dict = c.as_any().downcast_ref::<DictionaryArray<K>>()?;
                let values = dict.values().as_any().downcast_ref::<Utf8ViewArray>()?;
                if values.len() > dict.len().max(1) || values.null_count() > 0 {
                    return None;
                }
                let ids = (0..values.len())
                    .map(|i| K::try_from(mapping.insert_cat(values.value(i)).ok()?).ok())
                    .collect::<Option<Vec<K>>>()?;
                let keys = dict.keys();
                // A gather with no branch a row (a third of the time of one that returned an
                // Option a row). A null row's key may be anything (it stays under its null);
                // a present one must name a value.
                let n = ids.len();
                let (mut codes, mut bad) = (Vec::with_capacity(keys.len()), false);
                match keys.validity().filter(|v| v.unset_bits() > 0) {
                    None => codes.extend(keys.values().iter().map(|&k| {
                        let i = index(k);
                        bad |= i >= n;
                        ids.get(i).copied().unwrap_or_default()
                    })),
                    Some(valid) => codes.extend(keys.values().iter().zip(valid.iter()).map(|(&k, present)| {
                        let i = index(k);
                        bad |= present && i >= n;
                        ids.get(i).copied().unwrap_or_default()
                    })),
                }
                (!bad).then(|| PrimitiveArray::<K>::new(K::PRIMITIVE.into(), codes.into(), keys.validity().cloned()))
            })
            .collect()
    }
    with_codes!(dtype, name, translate(chunks, mapping))
}

/// A dictionary key as an index (one past any index where it is negative or too wide).
fn index<K: DictionaryKey>(k: K) -> usize {
    k.try_into().unwrap_or(usize::MAX)
}

/// An `Enum` Series over the dictionary chunks' codes, or None when a chunk is not a
/// dictionary of the dtype's physical width whose values are the dtype's categories in order.
fn enum_from_codes(name: PlSmallStr, dtype: &DataType, chunks: &[Box<dyn Array>]) -> Option<Series> {
    let DataType::Enum(_, mapping) = dtype else { return None };
    let holds_categories = |values: &dyn Array| {
        let values = values.as_any().downcast_ref::<Utf8ViewArray>()?;
        let same = (0..values.len()).all(|i| mapping.cat_to_str(i as CatSize) == values.get(i));
        (same && mapping.cat_to_str(values.len() as CatSize).is_none()).then_some(())
    };
    fn codes<K: DictionaryKey>(
        chunks: &[Box<dyn Array>],
        holds: &dyn Fn(&dyn Array) -> Option<()>,
    ) -> Option<Vec<PrimitiveArray<K>>> {
        chunks
            .iter()
            .map(|c| {
                let dict = c.as_any().downcast_ref::<DictionaryArray<K>>()?;
                holds(dict.values().as_ref())?;
                // Every non-null key names one of the values (the dtype's categories).
                let n = dict.values().len();
                let keys = dict.keys();
                let in_range = match keys.null_count() {
                    0 => keys.values().iter().all(|&k| index(k) < n),
                    _ => keys.iter().all(|k| k.is_none_or(|&k| index(k) < n)),
                };
                in_range.then(|| keys.clone())
            })
            .collect()
    }
    with_codes!(dtype, name, codes(chunks, &holds_categories))
}

thread_local! {
    /// When this thread's latest entry point was called, and how long it took to import its
    /// inputs: for the profile (`POLARS_GBT_PROFILE=1`).
    static LAST_CALL: Cell<(SystemTime, Duration)> = const { Cell::new((SystemTime::UNIX_EPOCH, Duration::ZERO)) };
}

/// When this thread's latest entry point was called, and its inputs' import time.
pub(super) fn last_call() -> (SystemTime, Duration) {
    LAST_CALL.with(Cell::get)
}

/// [`import_inputs`], timed into [`last_call`].
///
/// # Safety
/// As [`import_inputs`].
unsafe fn import_timed(exports: *mut SeriesExport, n: usize) -> PolarsResult<Vec<Series>> {
    let (called, clock) = (SystemTime::now(), Instant::now());
    let inputs = import_inputs(exports, n);
    LAST_CALL.with(|c| c.set((called, clock.elapsed())));
    inputs
}

/// The body of an expression's entry point: `work` on the imported inputs, its Series
/// written to `return_value` or its error to pyo3-polars' error channel; a panic in the work
/// becomes an error naming the bug (`catch_panics`), and one anywhere else sets pyo3-polars'
/// panic marker, as its macro does.
///
/// # Safety
/// The pointers are Polars' for this call: `series` holds `n_series` exports for us to take.
pub(super) unsafe fn run_expression(
    series: *mut SeriesExport,
    n_series: usize,
    return_value: *mut SeriesExport,
    work: impl FnOnce(&[Series]) -> PolarsResult<Series>,
) {
    let outcome =
        catch_unwind(AssertUnwindSafe(move || match super::catch_panics(|| work(&import_timed(series, n_series)?)) {
            Ok(out) => *return_value = export_series(&out),
            Err(err) => pyo3_polars::derive::_update_last_error(err),
        }));
    if outcome.is_err() {
        pyo3_polars::derive::_set_panic();
    }
}

/// The body of an expression's output-field entry point, as [`run_expression`]: `output` of
/// the `n_fields` input fields at `fields`.
///
/// # Safety
/// As [`run_expression`].
pub(super) unsafe fn run_field(
    fields: *mut ArrowSchema,
    n_fields: usize,
    return_value: *mut ArrowSchema,
    output: impl FnOnce(&[Field]) -> PolarsResult<Field>,
) {
    let outcome = catch_unwind(AssertUnwindSafe(move || {
        let result = super::catch_panics(|| {
            let fields = if n_fields == 0 { &[][..] } else { std::slice::from_raw_parts(fields, n_fields) };
            let fields = fields
                .iter()
                .map(|f| polars_arrow::ffi::import_field_from_c(f).map(|f| Field::from(&f)))
                .collect::<PolarsResult<Vec<_>>>()?;
            output(&fields)
        });
        match result {
            Ok(out) => *return_value = polars_arrow::ffi::export_field_to_c(&out.to_arrow(CompatLevel::newest())),
            Err(err) => pyo3_polars::derive::_update_last_error(err),
        }
    }));
    if outcome.is_err() {
        pyo3_polars::derive::_set_panic();
    }
}

/// The pickled keyword arguments Polars passes an entry point.
///
/// # Safety
/// `ptr` holds `len` bytes for the call (or `len` is 0).
pub(super) unsafe fn kwargs_bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

/// `_polars_plugin_<name>` and `_polars_plugin_field_<name>` for `work(&[Series], kwargs)`
/// and `output(&[Field])`, as `#[polars_expr(output_type_func = output)]` writes them (the
/// FFI types, error channel and panic marker of pyo3-polars' version in Cargo.lock), with the
/// inputs imported by [`import_inputs`].
macro_rules! plugin_expression {
    ($entry:ident, $field_entry:ident, $work:path, $output:path, $kwargs:ty) => {
        /// # Safety
        /// Called by Polars through the plugin interface, with pointers valid for the call.
        #[no_mangle]
        pub unsafe extern "C" fn $entry(
            series: *mut pyo3_polars::export::polars_ffi::version_0::SeriesExport,
            n_series: usize,
            kwargs_ptr: *const u8,
            kwargs_len: usize,
            return_value: *mut pyo3_polars::export::polars_ffi::version_0::SeriesExport,
            _context: *mut pyo3_polars::export::polars_ffi::version_0::CallerContext,
        ) {
            $crate::python::abi::run_expression(series, n_series, return_value, |inputs| {
                let raw = $crate::python::abi::kwargs_bytes(kwargs_ptr, kwargs_len);
                let kwargs: $kwargs = pyo3_polars::derive::_parse_kwargs(raw)?;
                $work(inputs, kwargs)
            })
        }

        /// # Safety
        /// As the expression's entry point.
        #[no_mangle]
        pub unsafe extern "C" fn $field_entry(
            fields: *mut polars_arrow::ffi::ArrowSchema,
            n_fields: usize,
            return_value: *mut polars_arrow::ffi::ArrowSchema,
            _kwargs_ptr: *const u8,
            _kwargs_len: usize,
        ) {
            $crate::python::abi::run_field(fields, n_fields, return_value, $output)
        }
    };
}

pub(crate) use plugin_expression;
