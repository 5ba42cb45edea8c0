//! The training matrix on the device: bins row-major, one byte per value when every feature
//! has fewer than 256 bins (missing included), else two, or four past 65,535 bins; 8-bit
//! bins are kept column-major as well, for the partition (see [`DeviceMatrix::cols`]).
//! Columns travel from their Arrow buffers through a reusable pinned staging buffer in blocks
//! of rows (mostly-null ones as their present values only), and are binned by a kernel; the
//! copy of one block overlaps the reading of the next. Nothing of the size of the data is ever
//! allocated on the host.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice};
use rayon::prelude::*;

use super::launch::{kernel_args, launch, DevPtr, DevPtrMut, Pins};
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::data::{BinnedMatrix, FeatureCuts, FeatureFrame};
use crate::error::Result;

/// Rows staged per block: 28 features x 2^17 rows is 14 MiB of f32 values (twice: one block
/// is read on the host while the previous one is copied).
const STAGE_ROWS: usize = 1 << 17;
/// A matrix of at most this many bytes (as float32 values) is staged in pageable memory.
const SMALL_STAGE_BYTES: usize = 1 << 20;

pub enum DeviceBins {
    /// Every value's bin, rows padded to whole 32-bit words.
    U8(CudaSlice<u8>),
    U16(CudaSlice<u16>),
    U32(CudaSlice<u32>),
    /// Compressed rows (kernels/sparse.cu): only present values, each as its histogram slot
    /// (`slot_offsets[feature] + bin`), sorted, row r in 16-byte words `row_words[r]..[r + 1]`
    /// padded with the type's maximum; 16-bit entries when every slot fits, else 32-bit.
    Sparse16(CudaSlice<u16>),
    Sparse32(CudaSlice<u32>),
}

/// Dense rows as the kernels take them (`DenseBins` in kernels/common.cuh): the bins and the
/// stride of a row.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DenseBins<'a, B> {
    pub bins: DevPtr<'a, B>,
    pub stride: u32,
}

/// Compressed rows as the kernels take them (`SparseEntries`): the entries and where each
/// row starts.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SparseEntries<'a, E> {
    pub entries: DevPtr<'a, E>,
    pub row_words: DevPtr<'a, u32>,
}

/// The cut points as the binning kernels take them (`BinCuts` in kernels/binning.cu).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BinCuts<'a> {
    pub cuts: DevPtr<'a, f32>,
    pub cut_offsets: DevPtr<'a, u32>,
    pub categorical: DevPtr<'a, u32>,
}

/// `bin_block`'s arguments but the bins: `block_rows` staged rows from row `row0`,
/// column-major; `col_rows` 0: no column copy.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BinBlock<'a> {
    pub values: DevPtr<'a, f32>,
    pub block_rows: u32,
    pub row0: u32,
    pub n_features: u32,
    pub stride: u32,
    pub binning: BinCuts<'a>,
    pub col_rows: u32,
}

/// `bin_block_u8`, `_u16`, `_u32`: null `cols` without a column copy.
#[repr(C)]
pub struct BinBlockArgs<'a, B> {
    pub block: BinBlock<'a>,
    pub bins: DevPtrMut<'a, B>,
    pub cols: DevPtrMut<'a, B>,
}

/// `place_present`'s arguments but the entries: `n_present` values (their `rows` within the
/// block from `row0`, `NO_ROW` for none; `col_start`: each feature's first) into their rows.
#[repr(C)]
pub struct PresentValues<'a> {
    pub rows: DevPtr<'a, u32>,
    pub vals: DevPtr<'a, f32>,
    pub n_present: u32,
    pub col_start: DevPtr<'a, u32>,
    pub n_features: u32,
    pub row0: u32,
    pub binning: BinCuts<'a>,
    pub slot_offsets: DevPtr<'a, u32>,
    pub row_words: DevPtr<'a, u32>,
    pub row_len: DevPtrMut<'a, u32>,
}

/// `place_present_s16`, `_s32`.
#[repr(C)]
pub struct PlacePresentArgs<'a, E> {
    pub present: PresentValues<'a>,
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

kernel_args!(
    DenseBins<B>,
    SparseEntries<E>,
    BinCuts,
    BinBlock,
    BinBlockArgs<B>,
    PresentValues,
    PlacePresentArgs<E>,
    SortRowsArgs<E>
);

/// A matrix's rows in its layout, for the kernel of the layout ([`DeviceMatrix::rows`]).
pub enum MatrixRows<'a> {
    U8(DenseBins<'a, u8>),
    U16(DenseBins<'a, u16>),
    U32(DenseBins<'a, u32>),
    S16(SparseEntries<'a, u16>),
    S32(SparseEntries<'a, u32>),
}

pub struct DeviceMatrix {
    pub bins: DeviceBins,
    pub n_rows: usize,
    pub n_features: usize,
    /// Entries per row in memory: the features padded to whole 32-bit words (dense: kernels
    /// read a row a word at a time); 0 for compressed rows, whose rows start at `row_words`.
    pub stride: usize,
    /// Compressed rows: where each row's 16-byte words start (n_rows + 1 offsets).
    pub row_words: Option<CudaSlice<u32>>,
    /// `stride` as the kernels take it.
    stride_arg: u32,
    /// 8-bit bins again, column-major (`cols[f * n_rows + row]`): the partition reads one
    /// feature of a node's rows, ascending, so a 32-byte sector serves all the rows of the node
    /// it holds, where a row-major sector serves one row. Histograms and margin updates read
    /// every feature of a row, and stay row-major.
    pub cols: Option<CudaSlice<u8>>,
    /// Bins per feature, not counting the missing bin (whose id is this number).
    pub n_bins: Vec<u32>,
    /// Where each feature's histogram starts within a node's histogram; the last entry is the total.
    pub slot_offsets: Vec<u32>,
    pub slot_offsets_dev: CudaSlice<u32>,
    pub categorical_dev: CudaSlice<u32>,
}

impl DeviceMatrix {
    pub fn total_slots(&self) -> usize {
        *self.slot_offsets.last().unwrap() as usize
    }

    /// Device bytes of the bins, every copy.
    pub fn bytes(&self) -> usize {
        let bins = match &self.bins {
            DeviceBins::U8(b) => b.len(),
            DeviceBins::U16(b) => 2 * b.len(),
            DeviceBins::U32(b) | DeviceBins::Sparse32(b) => 4 * b.len(),
            DeviceBins::Sparse16(b) => 2 * b.len(),
        };
        bins + self.cols.as_ref().map_or(0, |c| c.len()) + self.row_words.as_ref().map_or(0, |w| 4 * w.len())
    }

    /// Whether the bins are compressed rows.
    pub fn is_sparse(&self) -> bool {
        matches!(self.bins, DeviceBins::Sparse16(_) | DeviceBins::Sparse32(_))
    }

    /// Bins held in one 32-bit word.
    pub fn per_word(&self) -> usize {
        match self.bins {
            DeviceBins::U8(_) => 4,
            DeviceBins::U16(_) => 2,
            DeviceBins::U32(_) | DeviceBins::Sparse16(_) | DeviceBins::Sparse32(_) => 1,
        }
    }

    /// The rows as the kernels of the matrix's layout take them.
    pub(super) fn rows<'a>(&'a self, p: &mut Pins<'a>) -> MatrixRows<'a> {
        let stride = self.stride_arg;
        match (&self.bins, &self.row_words) {
            (DeviceBins::U8(b), _) => MatrixRows::U8(DenseBins { bins: p.read(b), stride }),
            (DeviceBins::U16(b), _) => MatrixRows::U16(DenseBins { bins: p.read(b), stride }),
            (DeviceBins::U32(b), _) => MatrixRows::U32(DenseBins { bins: p.read(b), stride }),
            (DeviceBins::Sparse16(e), Some(w)) => {
                MatrixRows::S16(SparseEntries { entries: p.read(e), row_words: p.read(w) })
            }
            (DeviceBins::Sparse32(e), Some(w)) => {
                MatrixRows::S32(SparseEntries { entries: p.read(e), row_words: p.read(w) })
            }
            (DeviceBins::Sparse16(_) | DeviceBins::Sparse32(_), None) => {
                unreachable!("compressed rows know where each row starts")
            }
        }
    }

    /// The dense layout for `frame`: one bin per value, 8, 16 or 32 bits as `cuts` need.
    pub fn dense(frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Layout {
        let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
        let width = BinnedMatrix::bin_width(&n_bins);
        Layout::Dense { width, stride: frame.n_features().next_multiple_of(4 / width) }
    }

    /// The layout for `frame`: compressed rows when most values are null and that takes less
    /// memory than the dense bins (decided from Arrow's null counts, then each row's present
    /// values).
    pub fn plan(frame: &FeatureFrame, cuts: &[FeatureCuts]) -> Layout {
        let (n, nf) = (frame.n_rows(), frame.n_features());
        let dense = Self::dense(frame, cuts);
        let nulls: usize = frame.columns().iter().flat_map(|c| c.chunks()).map(|a| a.null_count()).sum();
        // A histogram group's start within a row is kept in 16 bits (`index_groups`).
        if nf > MAX_SPARSE_FEATURES || n == 0 || nulls * 2 < n * nf {
            return dense;
        }
        let total_slots: u64 = cuts.iter().map(|c| c.n_bins() as u64 + 1).sum();
        // Slots 0..total_slots, and the padding above them.
        let entry_bytes = if total_slots < u16::MAX as u64 { 2 } else { 4 };
        let per_word = 16 / entry_bytes;
        let mut row_words = Vec::with_capacity(n + 1);
        row_words.push(0u32);
        let mut words = 0u64;
        for present in present_per_row(frame) {
            words += (present as u64).div_ceil(per_word as u64);
            if words > u32::MAX as u64 {
                return dense;
            }
            row_words.push(words as u32);
        }
        let sparse = Layout::Sparse(CompressedRows { entry_bytes, row_words });
        if sparse.device_bytes(n, nf) < dense.device_bytes(n, nf) {
            sparse
        } else {
            dense
        }
    }

    /// Bins `frame` with `cuts` on the device, stored as `layout` (from [`DeviceMatrix::plan`]).
    pub fn upload(
        rt: &Runtime,
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        frame: &FeatureFrame,
        cuts: &[FeatureCuts],
        layout: Layout,
    ) -> Result<Self> {
        let (n, nf) = (frame.n_rows(), frame.n_features());
        let tables = BinTables::upload(stream, memory, cuts)?;
        let mut cols = if layout.keeps_columns() { Some(memory.zeros::<u8>(stream, n * nf)?) } else { None };
        let (mut bins, stride, row_words) = allocate_bins(stream, memory, &layout, n)?;
        let block = STAGE_ROWS.min(n.max(1));
        // Compressed rows count each row's entries as its values arrive (then sort them).
        let mut row_len = match layout {
            Layout::Sparse(_) => Some(memory.zeros::<u32>(stream, n.max(1))?),
            Layout::Dense { .. } => None,
        };
        let mut staged = staging_slots(stream, memory, &layout, n, nf, block)?;
        let binning = tables.binning();
        for (i, start) in (0..n).step_by(block).enumerate() {
            let rows = block.min(n - start);
            let (slot, done) = &mut staged[i % 2];
            done.synchronize().map_err(device_error)?;
            match (slot, &mut bins) {
                (Staged::Present(p), entries) => {
                    let row_len = row_len.as_mut().expect("compressed rows count their entries");
                    let row_words = row_words.as_ref().expect("compressed rows know where each row starts");
                    let slot_offsets = &tables.slot_offsets_dev;
                    let place = Placement { binning: &binning, slot_offsets, row_words, row_len, entries };
                    p.stage(rt, memory, frame, start, rows, place)?;
                }
                (Staged::Dense { host, dev }, dense) => {
                    let rows_at = BlockRows { start, rows, n, stride };
                    stage_dense(rt, stream, frame, rows_at, &binning, host, dev, dense, cols.as_mut())?;
                }
            }
            done.record(stream).map_err(device_error)?;
        }
        if let (Some(row_len), Some(row_words)) = (row_len.take(), &row_words) {
            sort_rows(rt, stream, n, &row_len, row_words, &mut bins)?;
            memory.allocated -= 4 * row_len.len();
        }
        stream.synchronize().map_err(device_error)?;
        let BinTables { n_bins, slot_offsets, slot_offsets_dev, categorical_dev, .. } = tables;
        Ok(DeviceMatrix {
            bins,
            n_rows: n,
            n_features: nf,
            stride,
            row_words,
            stride_arg: stride as u32,
            cols,
            n_bins,
            slot_offsets,
            slot_offsets_dev,
            categorical_dev,
        })
    }
}

/// What binning reads besides the values, on the device: each feature's cut points
/// (flattened; a categorical feature reserves one slot per category), where each starts,
/// which features are categorical, and each feature's first histogram slot.
struct BinTables {
    n_bins: Vec<u32>,
    slot_offsets: Vec<u32>,
    cuts: CudaSlice<f32>,
    cut_offsets: CudaSlice<u32>,
    categorical_dev: CudaSlice<u32>,
    slot_offsets_dev: CudaSlice<u32>,
}

impl BinTables {
    fn upload(stream: &Arc<CudaStream>, memory: &mut DeviceMemory, cuts: &[FeatureCuts]) -> Result<Self> {
        let n_bins: Vec<u32> = cuts.iter().map(FeatureCuts::n_bins).collect();
        let mut slot_offsets = vec![0u32];
        for &b in &n_bins {
            slot_offsets.push(slot_offsets.last().unwrap() + b + 1);
        }
        let mut flat_cuts = Vec::new();
        let mut cut_offsets = vec![0u32];
        for c in cuts {
            match c {
                FeatureCuts::Numeric { cuts } => flat_cuts.extend_from_slice(cuts),
                FeatureCuts::Categorical { n_categories } => {
                    flat_cuts.extend(std::iter::repeat_n(0f32, *n_categories as usize))
                }
            }
            cut_offsets.push(flat_cuts.len() as u32);
        }
        flat_cuts.push(0.0); // never empty
        let categorical: Vec<u32> = cuts.iter().map(|c| c.is_categorical() as u32).collect();
        Ok(BinTables {
            cuts: memory.upload(stream, &flat_cuts)?,
            cut_offsets: memory.upload(stream, &cut_offsets)?,
            categorical_dev: memory.upload(stream, &categorical)?,
            slot_offsets_dev: memory.upload(stream, &slot_offsets)?,
            n_bins,
            slot_offsets,
        })
    }

    fn binning(&self) -> Binning<'_> {
        Binning { cuts: &self.cuts, cut_offsets: &self.cut_offsets, categorical: &self.categorical_dev }
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

/// The staging slots of an upload of `n` rows in blocks of `block`: one, or two that take
/// turns (a block is read into one while the other's copy and kernels run), each with the
/// event that says its last copy finished.
fn staging_slots(
    stream: &Arc<CudaStream>,
    memory: &mut DeviceMemory,
    layout: &Layout,
    n: usize,
    nf: usize,
    block: usize,
) -> Result<Vec<(Staged, CudaEvent)>> {
    let ctx = stream.context();
    // A small matrix (one block, a group's fit) is staged in pageable memory: pinning a
    // buffer would cost the driver more than the copy it speeds up.
    let pageable = n <= block && n * nf * 4 <= SMALL_STAGE_BYTES;
    let mut staged = Vec::new();
    for _ in 0..if n <= block { 1 } else { 2 } {
        let slot = match layout {
            // Compressed rows stage only the present values (a mostly-null block is mostly NaN).
            Layout::Sparse(_) => Staged::Present(Box::new(PresentStage::new(stream, memory, nf)?)),
            Layout::Dense { .. } => {
                let host = if pageable {
                    DenseHost::Pageable(vec![0f32; block * nf])
                } else {
                    // SAFETY: the pinned buffer is written on the host only after its event
                    // says the previous copy out of it finished.
                    DenseHost::Pinned(unsafe { ctx.alloc_pinned::<f32>(block * nf) }.map_err(device_error)?)
                };
                Staged::Dense { host, dev: memory.zeros::<f32>(stream, block * nf)? }
            }
        };
        let done: CudaEvent = ctx.new_event(None).map_err(device_error)?;
        staged.push((slot, done));
    }
    Ok(staged)
}

/// Where a staged block sits: its first row and row count, of `n` rows of dense bins `stride`
/// apart.
struct BlockRows {
    start: usize,
    rows: usize,
    n: usize,
    stride: usize,
}

/// Reads a block of rows from the columns into the slot's host buffer, copies it to the
/// device and queues its binning into the dense bins (and the 8-bit column copy).
#[allow(clippy::too_many_arguments)]
fn stage_dense<'a>(
    rt: &Runtime,
    stream: &Arc<CudaStream>,
    frame: &FeatureFrame,
    at: BlockRows,
    binning: &Binning<'a>,
    host: &mut DenseHost,
    dev: &'a mut CudaSlice<f32>,
    dense: &'a mut DeviceBins,
    cols: Option<&'a mut CudaSlice<u8>>,
) -> Result<()> {
    let BlockRows { start, rows, n, stride } = at;
    let nf = frame.n_features();
    let values = match host {
        DenseHost::Pinned(pinned) => pinned.as_mut_slice().map_err(device_error)?,
        DenseHost::Pageable(values) => values.as_mut_slice(),
    };
    values[..rows * nf].par_chunks_mut(rows).zip(frame.columns().par_iter()).for_each(|(out, col)| {
        col.read(start, out);
    });
    stream.memcpy_htod(&values[..rows * nf], &mut dev.slice_mut(..rows * nf)).map_err(device_error)?;
    // The kernel only reads the staged values, queued after their copy on the same stream.
    let dev: &'a CudaSlice<f32> = dev;
    let mut p = Pins::new(stream);
    let block = BinBlock {
        values: p.read(dev),
        block_rows: rows as u32,
        row0: start as u32,
        n_features: nf as u32,
        stride: stride as u32,
        binning: binning.pin(&mut p),
        // Without a column copy the kernel writes none (and `cols` is null).
        col_rows: if cols.is_some() { n as u32 } else { 0 },
    };
    bin_block(rt, stream, &mut p, block, dense, cols)
}

/// One staging slot: every value of a block on the host (pinned, or pageable for a small
/// matrix) and on the device, binned there (dense layouts), or the block's present values
/// (compressed rows).
enum Staged {
    Dense { host: DenseHost, dev: CudaSlice<f32> },
    Present(Box<PresentStage>),
}

enum DenseHost {
    Pinned(PinnedHostSlice<f32>),
    Pageable(Vec<f32>),
}

/// Where a block's present values go: their rows' entries (compressed rows), each row's
/// entries placed so far counted in `row_len`.
struct Placement<'a> {
    binning: &'a Binning<'a>,
    slot_offsets: &'a CudaSlice<u32>,
    row_words: &'a CudaSlice<u32>,
    row_len: &'a mut CudaSlice<u32>,
    entries: &'a mut DeviceBins,
}

/// The cut points on the device, as the binning kernels take them.
struct Binning<'a> {
    cuts: &'a CudaSlice<f32>,
    cut_offsets: &'a CudaSlice<u32>,
    categorical: &'a CudaSlice<u32>,
}

impl<'a> Binning<'a> {
    /// The cut points as a launch's arguments hold them.
    fn pin(&self, p: &mut Pins<'a>) -> BinCuts<'a> {
        BinCuts {
            cuts: p.read(self.cuts),
            cut_offsets: p.read(self.cut_offsets),
            categorical: p.read(self.categorical),
        }
    }
}

/// Queues the binning of a staged `block` into the dense `bins` and, for 8-bit bins, into the
/// column copy `cols` (which only 8-bit bins keep).
fn bin_block<'a>(
    rt: &Runtime,
    stream: &CudaStream,
    p: &mut Pins<'a>,
    block: BinBlock<'a>,
    bins: &'a mut DeviceBins,
    cols: Option<&'a mut CudaSlice<u8>>,
) -> Result<()> {
    let (k, c) = (&rt.kernels, grid_for(rt, block.block_rows as u64 * block.n_features as u64, 256));
    // SAFETY: every index stays below block_rows * n_features (values), the matrix's rows
    // times stride (bins) and col_rows * n_features (cols, null when col_rows is 0).
    unsafe {
        match (bins, cols) {
            (DeviceBins::U8(b), cols) => {
                let cols = cols.map_or(DevPtrMut::NULL, |c| p.write(c));
                launch(stream, &k.bin_block_u8, &BinBlockArgs { block, bins: p.write(b), cols }, c)
            }
            (DeviceBins::U16(b), None) => {
                launch(stream, &k.bin_block_u16, &BinBlockArgs { block, bins: p.write(b), cols: DevPtrMut::NULL }, c)
            }
            (DeviceBins::U32(b), None) => {
                launch(stream, &k.bin_block_u32, &BinBlockArgs { block, bins: p.write(b), cols: DevPtrMut::NULL }, c)
            }
            _ => unreachable!("dense rows have dense bins, and only 8-bit bins keep a column copy"),
        }
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
    let (mut p, c) = (Pins::new(stream), grid_for(rt, n as u64, 256));
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

/// The row of a staging slot no value took (`NO_ENTRY` in kernels/sparse.cu).
const NO_ROW: u32 = u32::MAX;

/// One staging slot's present values of a block (compressed rows): each column's rows and
/// values, read from its validity a word at a time ([`FeatureColumn::for_each_present`]),
/// sent to the device, and binned there straight into their rows' entries. Only the present
/// values cross, 8 bytes each (against 4 bytes for every value, null or not), and no block of
/// rows x features is formed on either side.
struct PresentStage {
    rows_host: PinnedHostSlice<u32>,
    vals_host: PinnedHostSlice<f32>,
    starts_host: PinnedHostSlice<u32>,
    rows_dev: CudaSlice<u32>,
    vals_dev: CudaSlice<f32>,
    starts_dev: CudaSlice<u32>,
    /// The fit's stream, which every copy and kernel of the staging goes on.
    stream: Arc<CudaStream>,
}

impl PresentStage {
    fn new(stream: &Arc<CudaStream>, memory: &mut DeviceMemory, nf: usize) -> Result<Self> {
        let ctx = stream.context();
        // SAFETY (pinned buffers): written on the host only after the slot's event says its
        // previous copies finished.
        Ok(PresentStage {
            rows_host: unsafe { ctx.alloc_pinned::<u32>(1) }.map_err(device_error)?,
            vals_host: unsafe { ctx.alloc_pinned::<f32>(1) }.map_err(device_error)?,
            starts_host: unsafe { ctx.alloc_pinned::<u32>(nf + 1) }.map_err(device_error)?,
            rows_dev: memory.zeros::<u32>(stream, 1)?,
            vals_dev: memory.zeros::<f32>(stream, 1)?,
            starts_dev: memory.zeros::<u32>(stream, nf + 1)?,
            stream: stream.clone(),
        })
    }

    /// Queues rows `start..start + rows` of `frame` into their compressed rows.
    fn stage(
        &mut self,
        rt: &Runtime,
        memory: &mut DeviceMemory,
        frame: &FeatureFrame,
        start: usize,
        rows: usize,
        place: Placement,
    ) -> Result<()> {
        let stream = &self.stream.clone();
        let nf = frame.n_features();
        // Each column's part is sized by its valid rows (bit counts, no pass over the values);
        // slots its NaN values leave unused are marked with no row.
        let counts: Vec<usize> = frame.columns().par_iter().map(|col| col.valid_count(start, rows)).collect();
        let total: usize = counts.iter().sum();
        if total == 0 {
            return Ok(());
        }
        if total > self.vals_host.len() {
            // A quarter more than this block needs, so that later blocks rarely grow it again.
            let cap = total + total / 4;
            let ctx = stream.context();
            // SAFETY: as in `new`; the old buffers' copies finished (the caller waited).
            self.rows_host = unsafe { ctx.alloc_pinned::<u32>(cap) }.map_err(device_error)?;
            self.vals_host = unsafe { ctx.alloc_pinned::<f32>(cap) }.map_err(device_error)?;
            memory.allocated -= 8 * self.vals_dev.len();
            self.rows_dev = memory.zeros::<u32>(stream, cap)?;
            self.vals_dev = memory.zeros::<f32>(stream, cap)?;
        }
        let starts = self.starts_host.as_mut_slice().map_err(device_error)?;
        starts[0] = 0;
        for f in 0..nf {
            starts[f + 1] = starts[f] + counts[f] as u32;
        }
        // Each column writes its own part of the two buffers.
        let (mut row_parts, mut val_parts) = (Vec::with_capacity(nf), Vec::with_capacity(nf));
        let mut rows_rest = &mut self.rows_host.as_mut_slice().map_err(device_error)?[..total];
        let mut vals_rest = &mut self.vals_host.as_mut_slice().map_err(device_error)?[..total];
        for &c in &counts {
            let (r, rr) = std::mem::take(&mut rows_rest).split_at_mut(c);
            let (v, vr) = std::mem::take(&mut vals_rest).split_at_mut(c);
            row_parts.push(r);
            val_parts.push(v);
            (rows_rest, vals_rest) = (rr, vr);
        }
        row_parts.into_par_iter().zip(val_parts).zip(frame.columns().par_iter()).for_each(|((r, v), col)| {
            let mut k = 0;
            col.for_each_present(start, rows, |row, x| {
                r[k] = (row - start) as u32;
                v[k] = x;
                k += 1;
            });
            r[k..].fill(NO_ROW);
        });
        stream
            .memcpy_htod(&self.rows_host.as_slice().map_err(device_error)?[..total], &mut self.rows_dev)
            .map_err(device_error)?;
        stream
            .memcpy_htod(&self.vals_host.as_slice().map_err(device_error)?[..total], &mut self.vals_dev)
            .map_err(device_error)?;
        stream
            .memcpy_htod(self.starts_host.as_slice().map_err(device_error)?, &mut self.starts_dev)
            .map_err(device_error)?;
        self.place(rt, total, nf, start, place)
    }

    /// Queues the placing of the `total` staged present values of the `nf` features of the
    /// block from row `start` into their rows.
    fn place(&self, rt: &Runtime, total: usize, nf: usize, start: usize, place: Placement) -> Result<()> {
        let stream = &*self.stream;
        let mut p = Pins::new(stream);
        let present = PresentValues {
            rows: p.read(&self.rows_dev),
            vals: p.read(&self.vals_dev),
            n_present: total as u32,
            col_start: p.read(&self.starts_dev),
            n_features: nf as u32,
            row0: start as u32,
            binning: place.binning.pin(&mut p),
            slot_offsets: p.read(place.slot_offsets),
            row_words: p.read(place.row_words),
            row_len: p.write(place.row_len),
        };
        let c = grid_for(rt, total as u64, 256);
        // SAFETY: the entries' rows are below `rows` (so start + row below the matrix's rows,
        // which row_len and row_words cover) and their columns below nf; `starts` has nf + 1
        // ascending offsets ending at `total`, the entries' count; the kernel writes inside
        // each row's words.
        unsafe {
            match place.entries {
                DeviceBins::Sparse16(e) => {
                    launch(stream, &rt.kernels.place_present_s16, &PlacePresentArgs { present, entries: p.write(e) }, c)
                }
                DeviceBins::Sparse32(e) => {
                    launch(stream, &rt.kernels.place_present_s32, &PlacePresentArgs { present, entries: p.write(e) }, c)
                }
                _ => unreachable!("present values are placed in compressed rows"),
            }
        }
    }
}

/// Features past which data stays dense: a histogram group's start within a compressed row
/// is kept in 16 bits (`kernels/sparse.cu`, index_groups), and a row holds up to one entry
/// per feature plus a word's padding.
const MAX_SPARSE_FEATURES: usize = 65_000;

/// How the bins are stored on the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    Dense { width: usize, stride: usize },
    Sparse(CompressedRows),
}

/// The shape of compressed rows, known from the columns' validity before anything is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressedRows {
    /// 2 or 4: an entry is a histogram slot, 16 bits when every slot fits.
    pub entry_bytes: usize,
    /// Where each row's 16-byte words start, and the total at the end (n_rows + 1 offsets).
    pub row_words: Vec<u32>,
}

impl CompressedRows {
    /// Entries of the longest row, padding included.
    pub fn longest_row(&self) -> usize {
        let words = self.row_words.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0) as usize;
        words * 16 / self.entry_bytes
    }
}

impl Layout {
    /// Whether the bins are kept column-major as well ([`DeviceMatrix::cols`]): dense 8-bit
    /// bins. Wider bins come from columns of hundreds of categories or more, whose fits the
    /// split search bounds rather than the partition, and whose matrix is already larger.
    pub fn keeps_columns(&self) -> bool {
        matches!(*self, Layout::Dense { width: 1, .. })
    }

    /// Device bytes of the matrix, every copy, for `n_rows` rows of `n_features` features.
    pub fn device_bytes(&self, n_rows: usize, n_features: usize) -> usize {
        match self {
            &Layout::Dense { width, stride } => {
                n_rows * (width * stride + if self.keeps_columns() { n_features } else { 0 })
            }
            Layout::Sparse(rows) => 16 * *rows.row_words.last().unwrap() as usize + 4 * rows.row_words.len(),
        }
    }
}

/// Each row's present (non-missing) values, counted block by block.
fn present_per_row(frame: &FeatureFrame) -> Vec<u32> {
    let n = frame.n_rows();
    let blocks: Vec<Vec<u32>> = (0..n.div_ceil(STAGE_ROWS))
        .into_par_iter()
        .map(|b| {
            let start = b * STAGE_ROWS;
            let rows = STAGE_ROWS.min(n - start);
            let mut present = vec![0u32; rows];
            for col in frame.columns() {
                col.for_each_present(start, rows, |row, _| present[row - start] += 1);
            }
            present
        })
        .collect();
    blocks.concat()
}

/// A grid-stride launch for `work` items: enough blocks to fill the GPU, no more.
pub fn grid_for(rt: &Runtime, work: u64, threads: u32) -> LaunchConfig {
    let blocks = work.div_ceil(threads as u64).clamp(1, rt.sm_count as u64 * 8) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}
