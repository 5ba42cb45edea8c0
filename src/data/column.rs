//! A feature column: the Arrow arrays (chunks) as they were given, read block by block into
//! small `f32` buffers. No row-major copy of the data is ever made: binning and prediction
//! read a few thousand values at a time straight from the Arrow buffers.
//!
//! Numeric columns (floats, integers, booleans) read as `f32`, nulls and NaN as NaN (missing).
//! Dictionary columns are categorical: they read as the category's code (an exact small
//! integer in `f32`), codes indexing a sorted list of category names shared by all chunks.
//! String columns are categorical too: each chunk is dictionary-encoded once when the column
//! is made (four bytes a row of keys, the distinct strings once).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, DictionaryArray, StringArray, UInt32Array};
use arrow_buffer::ArrowNativeType;
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// Rows read per block when scanning a column.
pub(crate) const BLOCK: usize = 8192;

/// Feature values are read clamped to `[-FINITE_LIMIT, FINITE_LIMIT]` (infinities and
/// `f32::MAX` included), so that `x < f32::MAX` holds for every present value and a split
/// sending all present values one way has a finite, serialisable threshold.
pub const FINITE_LIMIT: f32 = f32::from_bits(f32::MAX.to_bits() - 1);

/// Code given to a category the model never saw: larger than any real code, so it lies in
/// no split's category set.
pub const UNSEEN_CATEGORY: f32 = 16_777_215.0;

/// Whether a column is numeric or categorical, with the categorical column's names.
#[derive(Clone, Debug)]
pub enum ColumnKind {
    Numeric,
    /// `categories` is sorted and shared by all chunks; `remaps[c][k]` is the code of
    /// dictionary entry `k` of chunk `c` (chunks that share one dictionary share its remap).
    Categorical {
        categories: Arc<Vec<String>>,
        remaps: Vec<Arc<[f32]>>,
    },
}

/// One named feature column over Arrow arrays.
#[derive(Clone, Debug)]
pub struct FeatureColumn {
    name: String,
    chunks: Vec<ArrayRef>,
    /// Row where each chunk starts, plus the total length at the end.
    starts: Vec<usize>,
    kind: ColumnKind,
    /// The data type's name as the caller knows it (the Polars plugin gives Polars' names,
    /// "Datetime(us, UTC)"), for messages and the model's feature info; None: Arrow's name.
    dtype_name: Option<String>,
    /// A numeric value that means missing (XGBoost's `missing`): read as NaN, as nulls are.
    missing: Option<f32>,
}

impl FeatureColumn {
    /// A column over one or more Arrow arrays, which must share one data type.
    pub fn new(name: impl Into<String>, chunks: Vec<ArrayRef>) -> Result<Self> {
        let name = name.into();
        let chunks = if chunks.first().is_some_and(|c| is_string(c.data_type())) {
            chunks.iter().map(|c| string_to_dictionary(&name, c)).collect::<Result<Vec<_>>>()?
        } else {
            chunks
        };
        let Some(first) = chunks.first() else {
            return Err(Error::column(&name, "has no data (no chunks)"));
        };
        let dtype = first.data_type().clone();
        if let Some(other) = chunks.iter().find(|c| c.data_type() != &dtype) {
            return Err(Error::column(&name, format!("chunks mix data types {dtype} and {}", other.data_type())));
        }
        let kind = match &dtype {
            DataType::Dictionary(_, _) => {
                let per_chunk = dictionaries_values(&name, &chunks)?;
                let categories: Vec<String> = per_chunk
                    .iter()
                    .flat_map(|v| v.iter())
                    .flatten()
                    .cloned()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                Self::categorical_kind(Arc::new(categories), &per_chunk)
            }
            t if is_numeric(t) => ColumnKind::Numeric,
            t => {
                return Err(Error::column(
                    &name,
                    format!(
                        "has data type {t}; features must be numeric, boolean, strings or categorical (dictionary)"
                    ),
                ))
            }
        };
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut total = 0;
        for c in &chunks {
            starts.push(total);
            total += c.len();
        }
        starts.push(total);
        Ok(FeatureColumn { name, chunks, starts, kind, dtype_name: None, missing: None })
    }

    /// The same column, its values equal to `value` read as missing (numeric columns only:
    /// categories are names, not numbers). The Arrow buffers are untouched.
    pub fn with_missing_value(mut self, value: f32) -> Self {
        if matches!(self.kind, ColumnKind::Numeric) {
            self.missing = Some(value);
        }
        self
    }

    /// The same column, its data type named `name` in messages and in a model's feature info
    /// (the Polars plugin names Polars' dtypes; Arrow's names are the default).
    pub fn with_dtype_name(mut self, name: impl Into<String>) -> Self {
        self.dtype_name = Some(name.into());
        self
    }

    /// The data type's name: as set by [`FeatureColumn::with_dtype_name`], else Arrow's.
    pub fn dtype_name(&self) -> String {
        self.dtype_name.clone().unwrap_or_else(|| self.data_type().to_string())
    }

    /// The same column with its categories coded by `categories` (a model's), so that codes
    /// match the ones seen in training. Categories not in the list read as [`UNSEEN_CATEGORY`].
    pub fn with_categories(&self, categories: &Arc<Vec<String>>) -> Result<Self> {
        let per_chunk = dictionaries_values(&self.name, &self.chunks)?;
        let mut col = self.clone();
        col.kind = Self::categorical_kind(categories.clone(), &per_chunk);
        Ok(col)
    }

    fn categorical_kind(categories: Arc<Vec<String>>, per_chunk: &[Arc<Vec<Option<String>>>]) -> ColumnKind {
        let remap = |values: &[Option<String>]| -> Arc<[f32]> {
            values
                .iter()
                .map(|v| match v {
                    Some(s) => match categories.binary_search(s) {
                        Ok(code) => code as f32,
                        Err(_) => UNSEEN_CATEGORY,
                    },
                    None => f32::NAN,
                })
                .collect()
        };
        let mut remaps: Vec<Arc<[f32]>> = Vec::with_capacity(per_chunk.len());
        for (c, values) in per_chunk.iter().enumerate() {
            let shared = c > 0 && Arc::ptr_eq(values, &per_chunk[c - 1]);
            remaps.push(if shared { remaps[c - 1].clone() } else { remap(values) });
        }
        ColumnKind::Categorical { categories, remaps }
    }

    /// Rows `start..start + len` of the column, sharing its Arrow buffers (each chunk sliced,
    /// its dictionary and category codes kept whole, so the categories are the column's).
    pub fn row_range(&self, start: usize, len: usize) -> FeatureColumn {
        let end = start + len;
        assert!(end <= self.len(), "rows past the end of column {}", self.name);
        let (mut chunks, mut starts, mut remaps) = (Vec::new(), vec![0], Vec::new());
        for (c, chunk) in self.chunks.iter().enumerate() {
            let (from, to) = (self.starts[c].max(start), self.starts[c + 1].min(end));
            // An empty range keeps one empty chunk: a column has at least one.
            if from < to || (len == 0 && chunks.is_empty()) {
                let from = from.min(self.starts[c + 1]);
                let taken = to.saturating_sub(from);
                chunks.push(chunk.slice(from - self.starts[c], taken));
                starts.push(starts.last().unwrap() + taken);
                if let ColumnKind::Categorical { remaps: r, .. } = &self.kind {
                    remaps.push(r[c].clone());
                }
            }
        }
        let kind = match &self.kind {
            ColumnKind::Numeric => ColumnKind::Numeric,
            ColumnKind::Categorical { categories, .. } => {
                ColumnKind::Categorical { categories: categories.clone(), remaps }
            }
        };
        FeatureColumn { chunks, starts, kind, ..self.clone_header() }
    }

    /// The column's name, dtype name and missing value, with no data (for [`FeatureColumn::row_range`]).
    fn clone_header(&self) -> FeatureColumn {
        FeatureColumn {
            name: self.name.clone(),
            chunks: Vec::new(),
            starts: Vec::new(),
            kind: ColumnKind::Numeric,
            dtype_name: self.dtype_name.clone(),
            missing: self.missing,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The numeric value read as missing ([`FeatureColumn::with_missing_value`]), if any.
    pub fn missing_value(&self) -> Option<f32> {
        self.missing
    }

    pub fn len(&self) -> usize {
        *self.starts.last().unwrap_or(&0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn kind(&self) -> &ColumnKind {
        &self.kind
    }

    pub fn is_categorical(&self) -> bool {
        matches!(self.kind, ColumnKind::Categorical { .. })
    }

    /// The sorted category names of a categorical column.
    pub fn categories(&self) -> Option<&Arc<Vec<String>>> {
        match &self.kind {
            ColumnKind::Categorical { categories, .. } => Some(categories),
            ColumnKind::Numeric => None,
        }
    }

    /// The Arrow data type of the chunks.
    pub fn data_type(&self) -> &DataType {
        self.chunks[0].data_type()
    }

    /// The chunks as given (for backends that move buffers to a device).
    pub fn chunks(&self) -> &[ArrayRef] {
        &self.chunks
    }

    /// Reads rows `start..start + out.len()` as `f32`: missing (null or NaN) as NaN,
    /// categories as their codes.
    pub fn read(&self, start: usize, out: &mut [f32]) {
        let end = start + out.len();
        assert!(end <= self.len(), "read past the end of column {}", self.name);
        let mut chunk = self.starts.partition_point(|&s| s <= start) - 1;
        let mut row = start;
        let mut written = 0;
        while row < end {
            let chunk_start = self.starts[chunk];
            let chunk_end = self.starts[chunk + 1];
            let take = (chunk_end.min(end)) - row;
            let dst = &mut out[written..written + take];
            self.read_chunk(chunk, row - chunk_start, dst);
            written += take;
            row += take;
            chunk += 1;
        }
    }

    /// Calls `f(row, value)` for each row of `start..start + len` whose value is present, in
    /// ascending order, with the value [`FeatureColumn::read`] gives it. Mostly-null numeric
    /// chunks are walked a validity word at a time, so that their cost follows their present
    /// values, not their rows (a LibSVM-style column is 95% null); the others are read.
    pub fn for_each_present(&self, start: usize, len: usize, mut f: impl FnMut(usize, f32)) {
        let end = start + len;
        assert!(end <= self.len(), "read past the end of column {}", self.name);
        if len == 0 {
            return;
        }
        let mut chunk = self.starts.partition_point(|&s| s <= start) - 1;
        let mut row = start;
        let mut buf = Vec::new();
        while row < end {
            let chunk_start = self.starts[chunk];
            let take = self.starts[chunk + 1].min(end) - row;
            let array = self.chunks[chunk].as_ref();
            let mostly_null = array.logical_nulls().is_some_and(|n| n.null_count() * 2 > n.len());
            let walked = matches!(self.kind, ColumnKind::Numeric)
                && mostly_null
                && visit_valid(array, row - chunk_start, take, |j, x| {
                    if !x.is_nan() && Some(x) != self.missing {
                        f(row + j, x)
                    }
                });
            if !walked {
                for at in (0..take).step_by(BLOCK) {
                    let n = BLOCK.min(take - at);
                    buf.resize(n, 0f32);
                    self.read_chunk(chunk, row - chunk_start + at, &mut buf);
                    buf.iter().enumerate().filter(|(_, x)| !x.is_nan()).for_each(|(j, &x)| f(row + at + j, x));
                }
            }
            row += take;
            chunk += 1;
        }
    }

    /// How many rows of `start..start + len` are not null: at least as many as
    /// [`FeatureColumn::for_each_present`] visits (a NaN or the missing-value sentinel is not
    /// null but missing), from the validity bitmaps' bit counts alone.
    pub fn valid_count(&self, start: usize, len: usize) -> usize {
        let end = start + len;
        assert!(end <= self.len(), "read past the end of column {}", self.name);
        let mut valid = 0;
        let mut row = start;
        let mut chunk = self.starts.partition_point(|&s| s <= start) - 1;
        while row < end {
            let take = self.starts[chunk + 1].min(end) - row;
            let offset = row - self.starts[chunk];
            valid += take - self.chunks[chunk].logical_nulls().map_or(0, |n| n.slice(offset, take).null_count());
            row += take;
            chunk += 1;
        }
        valid
    }

    fn read_chunk(&self, chunk: usize, offset: usize, out: &mut [f32]) {
        let array = &self.chunks[chunk];
        match &self.kind {
            ColumnKind::Numeric => {
                read_numeric(array.as_ref(), offset, out);
                if let Some(m) = self.missing {
                    out.iter_mut().filter(|v| **v == m).for_each(|v| *v = f32::NAN);
                }
            }
            ColumnKind::Categorical { remaps, .. } => read_codes(array.as_ref(), &remaps[chunk], offset, out),
        }
    }
}

fn is_numeric(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Float32
            | DataType::Float64
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Boolean
    )
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// A string array as a dictionary array (UInt32 keys, the distinct strings in order of first
/// appearance), nulls kept: from here on it is a categorical column like any other.
fn string_to_dictionary(name: &str, array: &ArrayRef) -> Result<ArrayRef> {
    fn encode<'a>(strings: impl Iterator<Item = Option<&'a str>>, len: usize) -> (Vec<u32>, Vec<&'a str>) {
        let mut codes: HashMap<&str, u32> = HashMap::new();
        let mut values = Vec::new();
        let mut keys = Vec::with_capacity(len);
        for s in strings {
            keys.push(match s {
                Some(s) => *codes.entry(s).or_insert_with(|| {
                    values.push(s);
                    (values.len() - 1) as u32
                }),
                None => 0,
            });
        }
        (keys, values)
    }
    let (keys, values) = match array.data_type() {
        DataType::Utf8 => encode(array.as_string::<i32>().iter(), array.len()),
        DataType::LargeUtf8 => encode(array.as_string::<i64>().iter(), array.len()),
        DataType::Utf8View => encode(array.as_string_view().iter(), array.len()),
        t => return Err(Error::column(name, format!("chunks mix data types: strings and {t}"))),
    };
    let keys = UInt32Array::new(keys.into(), array.logical_nulls());
    let dict = DictionaryArray::try_new(keys, Arc::new(StringArray::from(values)))
        .map_err(|e| Error::column(name, format!("cannot encode its strings as categories: {e}")))?;
    Ok(Arc::new(dict))
}

/// Copies a primitive array's values into `out` with `as f32`, then marks nulls as NaN.
macro_rules! read_primitive {
    ($array:expr, $ty:ty, $offset:expr, $out:expr) => {{
        let values = &$array.as_primitive::<$ty>().values()[$offset..$offset + $out.len()];
        for (o, v) in $out.iter_mut().zip(values) {
            *o = *v as f32;
        }
    }};
}

fn read_numeric(array: &dyn Array, offset: usize, out: &mut [f32]) {
    match array.data_type() {
        DataType::Float32 => {
            out.copy_from_slice(&array.as_primitive::<Float32Type>().values()[offset..offset + out.len()]);
            clamp_to_finite(out);
        }
        DataType::Float64 => {
            read_primitive!(array, Float64Type, offset, out);
            clamp_to_finite(out);
        }
        DataType::Int8 => read_primitive!(array, Int8Type, offset, out),
        DataType::Int16 => read_primitive!(array, Int16Type, offset, out),
        DataType::Int32 => read_primitive!(array, Int32Type, offset, out),
        DataType::Int64 => read_primitive!(array, Int64Type, offset, out),
        DataType::UInt8 => read_primitive!(array, UInt8Type, offset, out),
        DataType::UInt16 => read_primitive!(array, UInt16Type, offset, out),
        DataType::UInt32 => read_primitive!(array, UInt32Type, offset, out),
        DataType::UInt64 => read_primitive!(array, UInt64Type, offset, out),
        DataType::Boolean => {
            let values = array.as_boolean().values();
            for (i, o) in out.iter_mut().enumerate() {
                *o = if values.value(offset + i) { 1.0 } else { 0.0 };
            }
        }
        other => unreachable!("column type {other} was rejected when the column was made"),
    }
    mark_nulls(array, offset, out);
}

/// Calls `f(j, value)` for each valid row `offset + j` (`j < len`) of a primitive numeric
/// array, a validity word at a time, values converted as [`read_numeric`] converts them (NaN
/// values are passed on: the caller drops them). False, having called nothing, for arrays it
/// does not walk (booleans).
fn visit_valid(array: &dyn Array, offset: usize, len: usize, mut f: impl FnMut(usize, f32)) -> bool {
    fn walk<T: ArrowPrimitiveType>(
        array: &dyn Array,
        offset: usize,
        len: usize,
        convert: impl Fn(T::Native) -> f32,
        f: &mut impl FnMut(usize, f32),
    ) {
        let values = array.as_primitive::<T>().values();
        let Some(nulls) = array.logical_nulls() else {
            (0..len).for_each(|j| f(j, convert(values[offset + j])));
            return;
        };
        let valid = nulls.inner();
        let chunks = valid.inner().bit_chunks(valid.offset() + offset, len);
        let words = chunks.iter().chain(std::iter::once(chunks.remainder_bits()));
        for (w, mut bits) in words.enumerate() {
            while bits != 0 {
                let j = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if j < len {
                    f(j, convert(values[offset + j]));
                }
            }
        }
    }
    let finite = |x: f32| x.clamp(-FINITE_LIMIT, FINITE_LIMIT);
    match array.data_type() {
        DataType::Float32 => walk::<Float32Type>(array, offset, len, finite, &mut f),
        DataType::Float64 => walk::<Float64Type>(array, offset, len, |v| finite(v as f32), &mut f),
        DataType::Int8 => walk::<Int8Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::Int16 => walk::<Int16Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::Int32 => walk::<Int32Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::Int64 => walk::<Int64Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::UInt8 => walk::<UInt8Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::UInt16 => walk::<UInt16Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::UInt32 => walk::<UInt32Type>(array, offset, len, |v| v as f32, &mut f),
        DataType::UInt64 => walk::<UInt64Type>(array, offset, len, |v| v as f32, &mut f),
        _ => return false,
    }
    true
}

/// Infinities and the extreme floats read as +-FINITE_LIMIT (NaN stays NaN).
fn clamp_to_finite(out: &mut [f32]) {
    for x in out.iter_mut() {
        *x = x.clamp(-FINITE_LIMIT, FINITE_LIMIT);
    }
}

/// Sets the null rows of `out` (rows `offset..` of `array`) to NaN, 64 rows a validity word:
/// all-valid words are skipped and all-null ones filled, so that neither dense nor mostly-null
/// columns pay a test and a branch a row.
fn mark_nulls(array: &dyn Array, offset: usize, out: &mut [f32]) {
    mark_null_rows(array.logical_nulls().as_ref(), offset, out);
}

/// NaN for each row of `out` (rows `offset..` of an array) that `nulls` marks null.
fn mark_null_rows(nulls: Option<&arrow_buffer::NullBuffer>, offset: usize, out: &mut [f32]) {
    let Some(nulls) = nulls else { return };
    if nulls.null_count() == 0 {
        return;
    }
    let valid = nulls.inner();
    let chunks = valid.inner().bit_chunks(valid.offset() + offset, out.len());
    let mut words = out.chunks_mut(64);
    for (word, rows) in chunks.iter().zip(&mut words) {
        mark_word(word, rows);
    }
    if let Some(rows) = words.next() {
        mark_word(chunks.remainder_bits(), rows);
    }
}

/// NaN for each row of `rows` (at most 64) whose bit in `valid` is clear.
#[inline]
fn mark_word(valid: u64, rows: &mut [f32]) {
    let all = if rows.len() == 64 { u64::MAX } else { (1u64 << rows.len()) - 1 };
    let valid = valid & all;
    if valid == all {
        return;
    }
    if valid.count_ones() < 16 {
        // Mostly null: keep the few values, fill, put them back.
        let mut kept = [0f32; 16];
        let mut bits = valid;
        let mut k = 0;
        while bits != 0 {
            kept[k] = rows[bits.trailing_zeros() as usize];
            bits &= bits - 1;
            k += 1;
        }
        rows.fill(f32::NAN);
        let mut bits = valid;
        let mut k = 0;
        while bits != 0 {
            rows[bits.trailing_zeros() as usize] = kept[k];
            bits &= bits - 1;
            k += 1;
        }
    } else {
        let mut nulls = !valid & all;
        while nulls != 0 {
            rows[nulls.trailing_zeros() as usize] = f32::NAN;
            nulls &= nulls - 1;
        }
    }
}

fn read_codes(array: &dyn Array, remap: &[f32], offset: usize, out: &mut [f32]) {
    fn typed<K: ArrowDictionaryKeyType>(array: &dyn Array, remap: &[f32], offset: usize, out: &mut [f32]) {
        let keys = array.as_dictionary::<K>().keys().values();
        let len = out.len();
        for (o, k) in out.iter_mut().zip(&keys[offset..offset + len]) {
            // A null slot may hold any key: mark_nulls overwrites it, so only stay in bounds here.
            *o = remap.get(k.as_usize()).copied().unwrap_or(f32::NAN);
        }
    }
    let DataType::Dictionary(key, _) = array.data_type() else {
        unreachable!("categorical columns hold dictionary arrays")
    };
    match key.as_ref() {
        DataType::Int8 => typed::<Int8Type>(array, remap, offset, out),
        DataType::Int16 => typed::<Int16Type>(array, remap, offset, out),
        DataType::Int32 => typed::<Int32Type>(array, remap, offset, out),
        DataType::Int64 => typed::<Int64Type>(array, remap, offset, out),
        DataType::UInt8 => typed::<UInt8Type>(array, remap, offset, out),
        DataType::UInt16 => typed::<UInt16Type>(array, remap, offset, out),
        DataType::UInt32 => typed::<UInt32Type>(array, remap, offset, out),
        DataType::UInt64 => typed::<UInt64Type>(array, remap, offset, out),
        other => unreachable!("dictionary key type {other} is not an integer"),
    }
    // The keys' nulls: null dictionary entries already read as NaN through their codes. (A
    // dictionary's logical nulls, which fold those in, are built anew over the whole array at
    // each call: once a block, they made scoring quadratic in a chunk's rows.)
    mark_null_rows(array.nulls(), offset, out);
}

/// Each chunk's dictionary values ([`dictionary_values`]), read once for a run of chunks that
/// share one dictionary (a Polars `Categorical` column's chunks: its categories are global).
fn dictionaries_values(name: &str, chunks: &[ArrayRef]) -> Result<Vec<Arc<Vec<Option<String>>>>> {
    let mut out: Vec<Arc<Vec<Option<String>>>> = Vec::with_capacity(chunks.len());
    for (c, chunk) in chunks.iter().enumerate() {
        let same = c > 0 && same_dictionary(&chunks[c - 1], chunk);
        out.push(if same { out[c - 1].clone() } else { Arc::new(dictionary_values(name, chunk)?) });
    }
    Ok(out)
}

/// Whether two dictionary arrays hold the same dictionary (the same array, not equal ones).
fn same_dictionary(a: &ArrayRef, b: &ArrayRef) -> bool {
    match (a.as_any_dictionary_opt(), b.as_any_dictionary_opt()) {
        (Some(a), Some(b)) => a.values().to_data().ptr_eq(&b.values().to_data()),
        _ => false,
    }
}

/// The values of a dictionary array's dictionary, as strings (or None for null entries).
fn dictionary_values(name: &str, array: &ArrayRef) -> Result<Vec<Option<String>>> {
    let DataType::Dictionary(_, value_type) = array.data_type() else {
        return Err(Error::column(name, "chunks mix dictionary and non-dictionary arrays"));
    };
    let any = array.as_any_dictionary();
    let values = any.values();
    let strings: Vec<Option<String>> = match value_type.as_ref() {
        DataType::Utf8 => values.as_string::<i32>().iter().map(|s| s.map(str::to_string)).collect(),
        DataType::LargeUtf8 => values.as_string::<i64>().iter().map(|s| s.map(str::to_string)).collect(),
        DataType::Utf8View => values.as_string_view().iter().map(|s| s.map(str::to_string)).collect(),
        t if is_numeric(t) && !matches!(t, DataType::Float32 | DataType::Float64) => {
            let mut buf = vec![0f32; values.len()];
            read_numeric(values.as_ref(), 0, &mut buf);
            // Integer dictionaries: name each category by its integer value.
            let ints = arrow_cast_to_i64(values.as_ref());
            ints.into_iter().zip(buf).map(|(i, f)| if f.is_nan() { None } else { Some(i.to_string()) }).collect()
        }
        t => return Err(Error::column(name, format!("dictionary values of type {t} are not supported; use strings"))),
    };
    Ok(strings)
}

fn arrow_cast_to_i64(values: &dyn Array) -> Vec<i64> {
    macro_rules! ints {
        ($($ty:ty),*) => {
            match values.data_type() {
                $(t if t == &<$ty as ArrowPrimitiveType>::DATA_TYPE => values.as_primitive::<$ty>().values().iter().map(|&v| v as i64).collect(),)*
                DataType::Boolean => values.as_boolean().values().iter().map(|b| b as i64).collect(),
                _ => vec![0; values.len()],
            }
        };
    }
    ints!(Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::Rng;
    use arrow_array::Float32Array;

    /// A row range reads what the whole column reads at those rows, across chunk edges, for
    /// numeric and dictionary columns (whose codes stay the whole column's), empty ranges too.
    #[test]
    fn row_ranges_read_as_the_whole_column() {
        use arrow_array::types::Int32Type;
        use arrow_array::{DictionaryArray, Int32Array, StringArray};
        let numeric = FeatureColumn::new(
            "x",
            vec![
                Arc::new(Float32Array::from(vec![Some(1.0), None, Some(3.0)])) as ArrayRef,
                Arc::new(Float32Array::from(vec![Some(4.0), Some(5.0)])) as ArrayRef,
            ],
        )
        .unwrap()
        .with_missing_value(5.0);
        let dict = |keys: Vec<Option<i32>>, names: &[&str]| -> ArrayRef {
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(
                    Int32Array::from(keys),
                    Arc::new(StringArray::from(names.to_vec())),
                )
                .unwrap(),
            )
        };
        let categorical = FeatureColumn::new(
            "c",
            vec![dict(vec![Some(1), Some(0), None], &["b", "a"]), dict(vec![Some(0), Some(1)], &["c", "a"])],
        )
        .unwrap();
        for column in [numeric, categorical] {
            let mut whole = vec![0f32; 5];
            column.read(0, &mut whole);
            for start in 0..=5 {
                for len in 0..=5 - start {
                    let part = column.row_range(start, len);
                    assert_eq!(part.len(), len);
                    assert_eq!(part.categories(), column.categories());
                    let mut got = vec![0f32; len];
                    part.read(0, &mut got);
                    let want = &whole[start..start + len];
                    assert!(got.iter().zip(want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan())), "{start}+{len}");
                }
            }
        }
    }

    /// `read` marks exactly the null rows as NaN, word by word, for any slice of any array:
    /// offsets that do not start on a validity word, lengths that do not end on one, and
    /// densities from all null to all valid (the oracle asks the array row by row).
    #[test]
    fn reads_mark_exactly_the_null_rows() {
        let mut rng = Rng::new(7, 1);
        for case in 0..300 {
            let n = 1 + rng.below(700);
            let percent_valid = [0, 2, 5, 30, 50, 90, 99, 100][case % 8];
            let values: Vec<Option<f32>> =
                (0..n).map(|i| (rng.below(100) < percent_valid).then_some(i as f32 + 0.5)).collect();
            let whole = Float32Array::from(values);
            let at = rng.below(n);
            let len = 1 + rng.below(n - at);
            let array: ArrayRef = Arc::new(whole.slice(at, len));
            let column = FeatureColumn::new("x", vec![array.clone()]).unwrap();
            let start = rng.below(len);
            let mut out = vec![0f32; len - start];
            column.read(start, &mut out);
            for (i, &x) in out.iter().enumerate() {
                if array.is_null(start + i) {
                    assert!(x.is_nan(), "case {case}: row {} should be missing", start + i);
                } else {
                    assert_eq!(x, (at + start + i) as f32 + 0.5, "case {case}: row {}", start + i);
                }
            }
        }
    }

    /// `for_each_present` visits exactly the rows `read` gives a value, with that value: for
    /// every numeric type it walks word by word and one it reads, over several chunks, slices
    /// of arrays, NaN values, a missing-value sentinel and densities from none to all.
    #[test]
    fn present_values_are_the_values_read() {
        use arrow_array::{BooleanArray, Float64Array, Int32Array, UInt8Array};
        let mut rng = Rng::new(11, 2);
        for case in 0..240 {
            let percent_valid = [0, 1, 5, 30, 49, 51, 90, 100][case % 8];
            let chunk = |rng: &mut Rng| -> ArrayRef {
                let n = 1 + rng.below(300);
                let valid: Vec<bool> = (0..n).map(|_| rng.below(100) < percent_valid).collect();
                let raw: Vec<f64> =
                    (0..n).map(|i| if i % 17 == 3 { f64::NAN } else { (rng.below(40) as f64) - 7.0 }).collect();
                let at = rng.below(n);
                let array: ArrayRef = match case % 5 {
                    0 => Arc::new(Float32Array::from_iter((0..n).map(|i| valid[i].then_some(raw[i] as f32)))),
                    1 => Arc::new(Float64Array::from_iter((0..n).map(|i| valid[i].then_some(raw[i])))),
                    2 => Arc::new(Int32Array::from_iter((0..n).map(|i| valid[i].then_some(raw[i].max(0.0) as i32)))),
                    3 => Arc::new(UInt8Array::from_iter((0..n).map(|i| valid[i].then_some(raw[i].max(0.0) as u8)))),
                    _ => Arc::new(BooleanArray::from_iter((0..n).map(|i| valid[i].then_some(raw[i] > 3.0)))),
                };
                array.slice(at, n - at)
            };
            let chunks: Vec<ArrayRef> = (0..1 + rng.below(3)).map(|_| chunk(&mut rng)).collect();
            let mut column = FeatureColumn::new("x", chunks).unwrap();
            if case % 3 == 0 {
                column = column.with_missing_value(5.0);
            }
            let start = rng.below(column.len());
            let len = rng.below(column.len() - start + 1);
            let mut all = vec![0f32; len];
            column.read(start, &mut all);
            let want: Vec<(usize, u32)> =
                all.iter().enumerate().filter(|(_, x)| !x.is_nan()).map(|(i, x)| (start + i, x.to_bits())).collect();
            let mut got = Vec::new();
            column.for_each_present(start, len, |row, x| got.push((row, x.to_bits())));
            assert_eq!(got, want, "case {case}");
            let nulls = (start..start + len).filter(|&r| {
                let (c, at) = (column.starts.partition_point(|&s| s <= r) - 1, r);
                column.chunks[c].is_null(at - column.starts[c])
            });
            assert_eq!(column.valid_count(start, len), len - nulls.count(), "case {case}");
        }
    }
}
