//! A frame's feature columns on the device, as Arrow lays them out: each chunk's values buffer
//! (f32, f64, integers, booleans as bits, or a dictionary's keys), its validity bitmap, and a
//! dictionary chunk's category codes, copied as they are (kernels/columns.cu reads them).
//! The buffers go in bulk ([`copy_pieces`]): memcpy'd in parallel into pinned pages, a few MiB
//! at a time, each piece's DMA overlapping the copy of the next. Nothing is read value by value
//! on the host: the cut points' sample, the binning and the sizing of compressed rows are
//! device work.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrowPrimitiveType};
use arrow_buffer::{BooleanBuffer, ToByteSlice};
use arrow_schema::DataType;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr};

use super::launch::{kernel_args, DevPtr, Pins};
use super::transfer::{copy_pieces, Piece};
use super::DeviceMemory;
use crate::data::column::{ColumnKind, FeatureColumn};
use crate::data::FeatureFrame;
use crate::error::Result;

/// One Arrow chunk of one feature, as the kernels read it (`ColumnChunk` in
/// kernels/columns.cu): device addresses into the columns' arena.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ColumnChunk {
    pub values: u64,
    pub validity: u64,
    pub codes: u64,
    pub n_codes: u32,
    pub rows: u32,
    pub row0: u32,
    pub dtype: u32,
    pub values_bit: u32,
    pub validity_bit: u32,
    pub has_missing: u32,
    pub missing: f32,
}

// SAFETY: a #[repr(C)] struct of integers and a float, laid out as its CUDA twin (the layout
// probe checks it).
unsafe impl DeviceRepr for ColumnChunk {}

/// The columns as the kernels take them (`Columns`): feature f's chunks are
/// `chunks[chunk_start[f] .. chunk_start[f + 1]]`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Columns<'a> {
    pub chunks: DevPtr<'a, ColumnChunk>,
    pub chunk_start: DevPtr<'a, u32>,
}

kernel_args!(Columns);

/// The value types a chunk holds, as kernels/columns.cu names them (`DTYPE_*`, checked by the
/// layout probe), in the order of their codes.
pub const DTYPES: [(&str, DataType); 11] = [
    ("DTYPE_F32", DataType::Float32),
    ("DTYPE_F64", DataType::Float64),
    ("DTYPE_I8", DataType::Int8),
    ("DTYPE_I16", DataType::Int16),
    ("DTYPE_I32", DataType::Int32),
    ("DTYPE_I64", DataType::Int64),
    ("DTYPE_U8", DataType::UInt8),
    ("DTYPE_U16", DataType::UInt16),
    ("DTYPE_U32", DataType::UInt32),
    ("DTYPE_U64", DataType::UInt64),
    ("DTYPE_BOOL", DataType::Boolean),
];

/// The code of a value type ([`DTYPES`]).
fn dtype_code(t: &DataType) -> Option<u32> {
    DTYPES.iter().position(|(_, d)| d == t).map(|i| i as u32)
}

/// The feature columns of a frame, on the device.
pub struct DeviceColumns {
    /// Every buffer, each at a 16-byte boundary.
    _arena: CudaSlice<u8>,
    chunks: CudaSlice<ColumnChunk>,
    chunk_start: CudaSlice<u32>,
    pub n_rows: usize,
    pub n_features: usize,
    /// Device bytes held.
    pub bytes: usize,
}

impl DeviceColumns {
    /// Device bytes the columns of `frame` take (as [`DeviceColumns::upload`] lays them out).
    pub fn bytes_for(frame: &FeatureFrame) -> usize {
        let plan = Plan::of(frame);
        plan.end + plan.chunks.len() * std::mem::size_of::<ColumnChunk>() + 4 * (frame.n_features() + 1)
    }

    /// Copies every feature column of `frame` to the device, on `stream` (which it drains).
    pub fn upload(stream: &Arc<CudaStream>, memory: &mut DeviceMemory, frame: &FeatureFrame) -> Result<Self> {
        let plan = Plan::of(frame);
        let mut arena = memory.zeros::<u8>(stream, plan.end.max(16))?;
        copy_pieces(stream, &plan.pieces, &mut arena.as_view_mut(), plan.end)?;
        let base = {
            let (base, _guard) = arena.device_ptr(stream);
            base
        };
        let at = |offset: u64| if offset == NO_BUFFER { 0 } else { base + offset };
        let chunks: Vec<ColumnChunk> = plan
            .chunks
            .iter()
            .map(|c| ColumnChunk { values: at(c.values), validity: at(c.validity), codes: at(c.codes), ..*c })
            .collect();
        let bytes = plan.end + chunks.len() * std::mem::size_of::<ColumnChunk>() + 4 * plan.chunk_start.len();
        Ok(DeviceColumns {
            chunks: memory.upload(stream, &chunks)?,
            chunk_start: memory.upload(stream, &plan.chunk_start)?,
            _arena: arena,
            n_rows: frame.n_rows(),
            n_features: frame.n_features(),
            bytes,
        })
    }

    /// The columns as a launch's arguments hold them.
    pub fn pin<'a>(&'a self, p: &mut Pins<'a>) -> Columns<'a> {
        Columns { chunks: p.read(&self.chunks), chunk_start: p.read(&self.chunk_start) }
    }
}

/// Where a chunk has no such buffer (no validity: no nulls; no codes: numeric).
const NO_BUFFER: u64 = u64::MAX;

/// The arena's layout: each buffer's place, and each chunk's description with arena offsets.
#[derive(Default)]
struct Plan<'a> {
    pieces: Vec<Piece<'a>>,
    chunks: Vec<ColumnChunk>,
    chunk_start: Vec<u32>,
    end: usize,
}

impl<'a> Plan<'a> {
    fn of(frame: &'a FeatureFrame) -> Self {
        let mut plan = Plan { chunk_start: vec![0], ..Default::default() };
        for col in frame.columns() {
            let mut row0 = 0;
            for (c, chunk) in col.chunks().iter().enumerate() {
                plan.add_chunk(col, c, chunk.as_ref(), row0);
                row0 += chunk.len();
            }
            plan.chunk_start.push(plan.chunks.len() as u32);
        }
        plan
    }

    fn place(&mut self, bytes: &'a [u8]) -> u64 {
        let at = self.end;
        self.end = (at + bytes.len()).next_multiple_of(16);
        self.pieces.push(Piece { bytes, at });
        at as u64
    }

    /// Chunk `c` of `col` (`array`), from frame row `row0`.
    fn add_chunk(&mut self, col: &'a FeatureColumn, c: usize, array: &'a dyn Array, row0: usize) {
        let rows = array.len();
        let (values, values_bit, dtype, codes) = match col.kind() {
            ColumnKind::Categorical { remaps, .. } => {
                let keys = array.as_any_dictionary().keys();
                let dtype = dtype_code(keys.data_type()).expect("dictionary keys are integers");
                (self.place(primitive_bytes(keys)), 0, dtype, Some(remaps[c].to_byte_slice()))
            }
            ColumnKind::Numeric => match array.data_type() {
                DataType::Boolean => {
                    let (bytes, bit) = bit_bytes(array.as_boolean().values(), rows);
                    (self.place(bytes), bit, dtype_code(&DataType::Boolean).expect("booleans have a code"), None)
                }
                t => (self.place(primitive_bytes(array)), 0, dtype_code(t).expect("numeric columns"), None),
            },
        };
        let codes_at = codes.map_or(NO_BUFFER, |c| self.place(c));
        // Physical nulls: a dictionary's null entries read as NaN through their codes.
        let (validity, validity_bit) = match array.nulls().filter(|n| n.null_count() > 0) {
            Some(nulls) => {
                let (bytes, bit) = bit_bytes(nulls.inner(), rows);
                (self.place(bytes), bit)
            }
            None => (NO_BUFFER, 0),
        };
        let missing = col.missing_value();
        self.chunks.push(ColumnChunk {
            values,
            validity,
            codes: codes_at,
            n_codes: match col.kind() {
                ColumnKind::Categorical { remaps, .. } => remaps[c].len() as u32,
                ColumnKind::Numeric => 0,
            },
            rows: rows as u32,
            row0: row0 as u32,
            dtype,
            values_bit,
            validity_bit,
            has_missing: missing.is_some() as u32,
            missing: missing.unwrap_or(0.0),
        });
    }
}

/// The bytes of a primitive array's values (its rows only).
fn primitive_bytes(array: &dyn Array) -> &[u8] {
    macro_rules! bytes {
        ($($t:ty),*) => {
            match array.data_type() {
                $(t if t == &<$t as ArrowPrimitiveType>::DATA_TYPE => array.as_primitive::<$t>().values().inner().as_slice(),)*
                t => unreachable!("{t} columns are not primitive"),
            }
        };
    }
    bytes!(
        Float32Type,
        Float64Type,
        Int8Type,
        Int16Type,
        Int32Type,
        Int64Type,
        UInt8Type,
        UInt16Type,
        UInt32Type,
        UInt64Type
    )
}

/// The bytes holding `rows` bits from a bit buffer's first bit, and that bit's place in the
/// first byte.
fn bit_bytes(bits: &BooleanBuffer, rows: usize) -> (&[u8], u32) {
    let first = bits.offset() / 8;
    (&bits.inner().as_slice()[first..(bits.offset() + rows).div_ceil(8)], (bits.offset() % 8) as u32)
}
