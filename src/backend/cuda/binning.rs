//! Binning on the device (kernels/columns.cu, binning.cu, sparse.cu): the feature columns,
//! on the device in Arrow's layout ([`DeviceColumns`]), binned with their cut points straight
//! into the training matrix ([`DeviceMatrix`]) in its layout, dense rows or compressed ones
//! (mostly-null data: each row's present values counted, placed, then sorted). A wide dense
//! fit takes its columns a batch of features at a time ([`DeviceMatrix::upload_in_batches`]);
//! a streamed fit's batches are binned into their rows as they come (`stream_bins.rs`).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};

use super::columns::{Columns, DeviceColumns};
use super::cuts::device_cuts;
use super::data::{BinCuts, BinTables, Binning, DeviceBins, DeviceMatrix, Layout};
use super::launch::{grid_for, kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::data::{BinnedMatrix, FeatureCuts, FeatureFrame};
use crate::error::Result;

/// `bin_columns`' arguments but the bins (`BinColumns` in kernels/columns.cu).
#[repr(C)]
pub struct BinColumns<'a> {
    pub columns: Columns<'a>,
    pub n_rows: u32,
    pub n_features: u32,
    pub stride: u32,
    pub pad: u32,
    pub binning: BinCuts<'a>,
    pub any_present: DevPtrMut<'a, u32>,
}

/// `bin_columns_u8`, `_u16`, `_u32`: null `cols` without a column copy.
#[repr(C)]
pub struct BinColumnsArgs<'a, B> {
    pub b: BinColumns<'a>,
    pub bins: DevPtrMut<'a, B>,
    pub cols: DevPtrMut<'a, u8>,
}

/// `count_present`.
#[repr(C)]
pub struct CountPresentArgs<'a> {
    pub columns: Columns<'a>,
    pub n_rows: u32,
    pub n_features: u32,
    pub row_len: DevPtrMut<'a, u32>,
}

/// `place_columns`' arguments but the entries.
#[repr(C)]
pub struct PlaceColumns<'a> {
    pub columns: Columns<'a>,
    pub n_rows: u32,
    pub n_features: u32,
    pub binning: BinCuts<'a>,
    pub slot_offsets: DevPtr<'a, u32>,
    pub row_words: DevPtr<'a, u32>,
    pub row_len: DevPtrMut<'a, u32>,
}

/// `place_columns_s16`, `_s32`.
#[repr(C)]
pub struct PlaceColumnsArgs<'a, E> {
    pub p: PlaceColumns<'a>,
    pub entries: DevPtrMut<'a, E>,
}

/// `sort_rows_s16`, `_s32`.
#[repr(C)]
pub struct SortRowsArgs<'a, E> {
    pub row_len: DevPtr<'a, u32>,
    pub n_rows: u32,
    pub row_words: DevPtr<'a, u32>,
    pub entries: DevPtrMut<'a, E>,
}

kernel_args!(BinColumns, BinColumnsArgs<B>, CountPresentArgs, PlaceColumns, PlaceColumnsArgs<E>, SortRowsArgs<E>);

/// Features of a batch of columns on the device at once, when a wide dense fit takes its
/// columns in batches ([`DeviceMatrix::upload_in_batches`]). Above COLUMN_COPY_MAX_FEATURES, so
/// that a batched matrix never needs the column-major copy.
pub(super) const INGEST_BATCH_FEATURES: usize = 256;

impl DeviceMatrix {
    /// Bins `columns` (on the device) with `cuts`, stored as `layout` (from [`DeviceMatrix::plan`]),
    /// and says whether any value is present (a fit without one anywhere is an error).
    pub fn upload(
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        columns: &DeviceColumns,
        cuts: &[FeatureCuts],
        layout: Layout,
    ) -> Result<(Self, bool)> {
        let (n, nf) = (columns.n_rows, columns.n_features);
        let tables = BinTables::upload(stream, memory, cuts)?;
        let mut cols = match layout {
            Layout::Dense { width, .. } if layout.keeps_columns() => Some(memory.zeros::<u8>(stream, n * nf * width)?),
            _ => None,
        };
        let (mut bins, stride, row_words) = allocate_bins(stream, memory, &layout, n)?;
        let binning = tables.binning();
        let any_present = match (&layout, &row_words) {
            (Layout::Sparse(rows), Some(words)) => {
                let mut row_len = memory.zeros::<u32>(stream, n.max(1))?;
                let place =
                    SparseTarget { binning: &binning, slot_offsets: &tables.slot_offsets_dev, row_words: words };
                place_columns(rt, stream, columns, place, &mut row_len, &mut bins)?;
                sort_rows(rt, stream, n, &row_len, words, &mut bins)?;
                memory.allocated -= 4 * row_len.len();
                *rows.row_words.last().unwrap() > 0
            }
            _ => {
                let mut flag = memory.zeros::<u32>(stream, 1)?;
                bin_columns(rt, stream, columns, &binning, stride, (0, 0), &mut flag, &mut bins, cols.as_mut())?;
                memory.allocated -= 4;
                stream.clone_dtoh(&flag).map_err(device_error)?[0] != 0
            }
        };
        stream.synchronize().map_err(device_error)?;
        Ok((tables.into_matrix(bins, n, stride, row_words, cols), any_present))
    }

    /// Whether a fit of `frame` (one worker's) takes its columns to the device a batch of
    /// features at a time ([`DeviceMatrix::upload_in_batches`]): dense data wider than a batch
    /// whose bins are bytes whatever its cut points (`max_bin` at most 256, categorical columns
    /// of fewer than 255 categories), so that the matrix can be laid out before them.
    pub fn ingests_in_batches(frame: &FeatureFrame, max_bin: usize) -> bool {
        let bound = |c: &crate::data::FeatureColumn| match c.categories() {
            Some(cats) => cats.len() as u32 + 1,
            None => max_bin.saturating_sub(1) as u32,
        };
        let bounds: Vec<u32> = frame.columns().iter().map(bound).collect();
        frame.n_features() > INGEST_BATCH_FEATURES
            && !Self::may_compress(frame)
            && BinnedMatrix::bin_width(&bounds) == 1
    }

    /// Device bytes a batched ingest takes besides the bins: its largest batch of columns.
    pub fn batch_bytes(frame: &FeatureFrame) -> usize {
        let columns = frame.columns();
        columns
            .chunks(INGEST_BATCH_FEATURES)
            .map(|batch| DeviceColumns::bytes_for(&FeatureFrame::new(batch.to_vec()).unwrap_or_else(|_| frame.clone())))
            .max()
            .unwrap_or(0)
    }

    /// Cut points and bins of a wide dense frame ([`DeviceMatrix::ingests_in_batches`]), its
    /// columns on the device INGEST_BATCH_FEATURES at a time: each batch's cut points computed
    /// there (the CPU's, bit for bit, as for all the columns at once: a feature's cuts read
    /// only its own values of the same sampled rows), its values binned into the matrix at its
    /// features, and the batch freed, so the float columns are never all on the device (400k x
    /// 2,000 float32: 3,052 MiB of columns for 763 MiB of bins). One worker's fit only: the
    /// workers of a distributed fit gather their samples once, for all the features. Says
    /// whether any value is present, as [`DeviceMatrix::upload`].
    #[allow(clippy::too_many_arguments)]
    pub fn upload_in_batches(
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        frame: &FeatureFrame,
        weights: Option<&CudaSlice<f32>>,
        max_bin: usize,
        seed: u64,
        rows: &crate::collective::RowSpans,
    ) -> Result<(Self, Vec<FeatureCuts>, bool)> {
        let (n, nf) = (frame.n_rows(), frame.n_features());
        let stride = nf.next_multiple_of(4);
        let mut bins = DeviceBins::U8(memory.zeros::<u8>(stream, n * stride)?);
        let mut flag = memory.zeros::<u32>(stream, 1)?;
        let mut cuts = Vec::with_capacity(nf);
        for (b, batch) in frame.columns().chunks(INGEST_BATCH_FEATURES).enumerate() {
            let part = FeatureFrame::new(batch.to_vec())?;
            let columns = DeviceColumns::upload(stream, memory, &part)?;
            let solo = crate::collective::Solo;
            let part_cuts = device_cuts(rt, stream, memory, &part, &columns, weights, max_bin, seed, rows, &solo)?;
            let tables = BinTables::upload(stream, memory, &part_cuts)?;
            let binning = tables.binning();
            let first = b * INGEST_BATCH_FEATURES;
            bin_columns(rt, stream, &columns, &binning, stride, (0, first), &mut flag, &mut bins, None)?;
            stream.synchronize().map_err(device_error)?;
            memory.allocated -= columns.bytes + tables.bytes();
            drop((columns, tables));
            cuts.extend(part_cuts);
        }
        let any_present = stream.clone_dtoh(&flag).map_err(device_error)?[0] != 0;
        memory.allocated -= 4;
        let matrix = BinTables::upload(stream, memory, &cuts)?.into_matrix(bins, n, stride, None, None);
        Ok((matrix, cuts, any_present))
    }
}

/// The training matrix's storage for `layout` over `n` rows: dense bins of the layout's width
/// (and their row stride), or compressed rows (and where each row starts).
fn allocate_bins(
    stream: &Arc<CudaStream>,
    memory: &mut DeviceMemory,
    layout: &Layout,
    n: usize,
) -> Result<(DeviceBins, usize, Option<CudaSlice<u32>>)> {
    Ok(match layout {
        &Layout::Dense { width: 2, stride } => {
            (DeviceBins::U16(memory.zeros::<u16>(stream, n * stride)?), stride, None)
        }
        &Layout::Dense { width: 4, stride } => {
            (DeviceBins::U32(memory.zeros::<u32>(stream, n * stride)?), stride, None)
        }
        &Layout::Dense { stride, .. } => (DeviceBins::U8(memory.zeros::<u8>(stream, n * stride)?), stride, None),
        Layout::Sparse(rows) => {
            // Every row's words, and one more so that an empty matrix allocates something.
            let words = *rows.row_words.last().unwrap() as usize + 1;
            let entries = match rows.entry_bytes {
                2 => DeviceBins::Sparse16(memory.zeros::<u16>(stream, words * 8)?),
                _ => DeviceBins::Sparse32(memory.zeros::<u32>(stream, words * 4)?),
            };
            (entries, 0, Some(memory.upload(stream, &rows.row_words)?))
        }
    })
}

/// Where compressed rows' present values go: their histogram slots, into the rows at
/// `row_words`.
struct SparseTarget<'a> {
    binning: &'a Binning<'a>,
    slot_offsets: &'a CudaSlice<u32>,
    row_words: &'a CudaSlice<u32>,
}

/// A launch over the columns' tiles (`BIN_TILE_ROWS` rows x 32 features a block).
fn tiles(n_rows: usize, n_features: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n_rows.div_ceil(BIN_TILE_ROWS).max(1) as u32, n_features.div_ceil(32).max(1) as u32, 1),
        block_dim: (BIN_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Rows and threads of a block of the column kernels (kernels/columns.cu).
pub(super) const BIN_TILE_ROWS: usize = 64;
pub(super) const BIN_THREADS: u32 = 256;

/// Queues the binning of every column into the dense `bins` (rows `stride` apart, row i at
/// row `first_row + i`, column j at feature `first_feature + j`: `first`) and, for 8- and
/// 16-bit bins of all the rows, the column copy `cols`; `any_present` is set if a value is
/// present.
#[allow(clippy::too_many_arguments)]
pub(super) fn bin_columns<'a>(
    rt: &Runtime,
    stream: &CudaStream,
    columns: &'a DeviceColumns,
    binning: &Binning<'a>,
    stride: usize,
    (first_row, first_feature): (usize, usize),
    any_present: &'a mut CudaSlice<u32>,
    bins: &'a mut DeviceBins,
    cols: Option<&'a mut CudaSlice<u8>>,
) -> Result<()> {
    let (n, nf) = (columns.n_rows, columns.n_features);
    assert!(cols.is_none() || first_row == 0, "the column copy is of all the rows");
    let offset = first_row * stride + first_feature;
    let mut p = Pins::new(stream);
    let b = BinColumns {
        columns: columns.pin(&mut p),
        n_rows: n as u32,
        n_features: nf as u32,
        stride: stride as u32,
        pad: 0,
        binning: binning.pin(&mut p),
        any_present: p.write(any_present),
    };
    let cols = cols.map_or(DevPtrMut::NULL, |c| p.write(c));
    let (k, c) = (&rt.kernels, tiles(n, nf));
    // SAFETY: every tile's rows are below n and features below nf: bins hold (first_row + n)
    // x stride (the callers' allocations), with first_feature + nf <= stride; cols (given only
    // for all of the features and rows) nf x n bins of the same width.
    unsafe {
        match bins {
            DeviceBins::U8(bins) => {
                let bins = p.write(bins).skip(offset);
                launch(stream, &k.bin_columns_u8, &BinColumnsArgs { b, bins, cols }, c)
            }
            DeviceBins::U16(bins) => {
                let bins = p.write(bins).skip(offset);
                launch(stream, &k.bin_columns_u16, &BinColumnsArgs { b, bins, cols }, c)
            }
            DeviceBins::U32(bins) => {
                let bins = p.write(bins).skip(offset);
                launch(stream, &k.bin_columns_u32, &BinColumnsArgs { b, bins, cols }, c)
            }
            _ => unreachable!("dense rows have dense bins"),
        }
    }
}

/// Queues the placing of every present value into its compressed row (`row_len` counting
/// each row's entries so far).
fn place_columns<'a>(
    rt: &Runtime,
    stream: &CudaStream,
    columns: &'a DeviceColumns,
    place: SparseTarget<'a>,
    row_len: &'a mut CudaSlice<u32>,
    entries: &'a mut DeviceBins,
) -> Result<()> {
    let (n, nf) = (columns.n_rows, columns.n_features);
    let mut p = Pins::new(stream);
    let at = PlaceColumns {
        columns: columns.pin(&mut p),
        n_rows: n as u32,
        n_features: nf as u32,
        binning: place.binning.pin(&mut p),
        slot_offsets: p.read(place.slot_offsets),
        row_words: p.read(place.row_words),
        row_len: p.write(row_len),
    };
    let (k, c) = (&rt.kernels, tiles(n, nf));
    // SAFETY: rows below n, features below nf; row_words has n + 1 offsets within the
    // entries, and the kernel writes inside each row's words.
    unsafe {
        match entries {
            DeviceBins::Sparse16(e) => {
                launch(stream, &k.place_columns_s16, &PlaceColumnsArgs { p: at, entries: p.write(e) }, c)
            }
            DeviceBins::Sparse32(e) => {
                launch(stream, &k.place_columns_s32, &PlaceColumnsArgs { p: at, entries: p.write(e) }, c)
            }
            _ => unreachable!("present values are placed in compressed rows"),
        }
    }
}

impl DeviceColumns {
    /// Each row's present (non-missing) values, counted on the device.
    pub fn present_per_row(
        &self,
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
    ) -> Result<Vec<u32>> {
        let mut row_len = memory.zeros::<u32>(stream, self.n_rows.max(1))?;
        {
            let mut p = Pins::new(stream);
            let args = CountPresentArgs {
                columns: self.pin(&mut p),
                n_rows: self.n_rows as u32,
                n_features: self.n_features as u32,
                row_len: p.write(&mut row_len),
            };
            // SAFETY: every tile's rows are below n_rows, which row_len holds.
            unsafe { launch(stream, &rt.kernels.count_present, &args, tiles(self.n_rows, self.n_features))? };
        }
        let mut counts = stream.clone_dtoh(&row_len).map_err(device_error)?;
        counts.truncate(self.n_rows);
        memory.allocated -= 4 * row_len.len();
        Ok(counts)
    }
}

/// Queues the sorting of each of the `n` compressed rows' entries (`row_len` counted per row,
/// the rows at `row_words`).
fn sort_rows(
    rt: &Runtime,
    stream: &CudaStream,
    n: usize,
    row_len: &CudaSlice<u32>,
    row_words: &CudaSlice<u32>,
    entries: &mut DeviceBins,
) -> Result<()> {
    let (mut p, c) = (Pins::new(stream), grid_for(rt.sm_count, n as u64, 256));
    let (row_len, n_rows, row_words) = (p.read(row_len), n as u32, p.read(row_words));
    // SAFETY: row_len holds n counts, row_words n + 1 ascending offsets within the entries.
    unsafe {
        match entries {
            DeviceBins::Sparse16(e) => {
                let args = SortRowsArgs { row_len, n_rows, row_words, entries: p.write(e) };
                launch(stream, &rt.kernels.sort_rows_s16, &args, c)
            }
            DeviceBins::Sparse32(e) => {
                let args = SortRowsArgs { row_len, n_rows, row_words, entries: p.write(e) };
                launch(stream, &rt.kernels.sort_rows_s32, &args, c)
            }
            _ => unreachable!("compressed rows are 16- or 32-bit entries"),
        }
    }
}
