//! The training matrix on the device: bins row-major, one byte per value when every feature
//! has fewer than 256 bins (missing included), else two, or four past 65,535 bins; 8-bit
//! bins are kept column-major as well, for the partition (see [`DeviceMatrix::cols`]).
//! Mostly-null data is kept as compressed rows of its present values instead, when they take
//! less memory ([`DeviceMatrix::plan`]). The matrix is binned on the device from the columns
//! already there in Arrow's layout (`binning.rs`), or uploaded from rows binned on the host
//! ([`DeviceMatrix::from_host`]), or paged from them ([`DeviceMatrix::paged`]). Nothing of the
//! size of the data is ever allocated or read value by value on the host.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::launch::{kernel_args, DevPtr, Pins};
use super::pages::{PagePlan, Pages, Window};
use super::transfer::repitch_rows;
use super::{device_error, DeviceMemory};
use crate::data::binned::BinData;
use crate::data::{BinnedMatrix, FeatureCuts, FeatureFrame};
use crate::error::Result;

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
    /// Dense rows of 1, 2 or 4 bytes a value in host memory, paged to the device as passes
    /// reach them ([`Pages`]).
    Paged(Box<Pages>),
}

/// Dense rows as the kernels take them (`DenseBins` in kernels/common.cuh): the bins and the
/// stride of a row.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DenseBins<'a, B> {
    pub bins: DevPtr<'a, B>,
    pub stride: u32,
    /// The rows `bins` holds: `first_row..first_row + page_rows` of a paged matrix (see
    /// [`Window`]); 0 and `ALL_ROWS` for a matrix on the device whole.
    pub first_row: u32,
    pub page_rows: u32,
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

kernel_args!(DenseBins<B>, SparseEntries<E>, BinCuts);

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
    /// 8- or 16-bit bins again (as bytes), column-major (`cols[f * n_rows + row]`, of the
    /// matrix's width: twice `n_rows * n_features` bytes for 16-bit bins): the partition reads one
    /// feature of a node's rows, in row order (ascending or descending), so a 32-byte sector
    /// serves all the rows of the node it holds, where a row-major sector serves one row.
    /// Histograms and margin updates read every feature of a row, and stay row-major.
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
            DeviceBins::Paged(pages) => pages.slot_bytes(),
        };
        bins + self.cols.as_ref().map_or(0, |c| c.len()) + self.row_words.as_ref().map_or(0, |w| 4 * w.len())
    }

    /// Whether the bins are compressed rows.
    pub fn is_sparse(&self) -> bool {
        matches!(self.bins, DeviceBins::Sparse16(_) | DeviceBins::Sparse32(_))
    }

    /// Bins held in one 32-bit word.
    pub fn per_word(&self) -> usize {
        match &self.bins {
            DeviceBins::U8(_) => 4,
            DeviceBins::U16(_) => 2,
            DeviceBins::U32(_) | DeviceBins::Sparse16(_) | DeviceBins::Sparse32(_) => 1,
            DeviceBins::Paged(pages) => 4 / pages.width(),
        }
    }

    /// Whether the bins are paged from host memory.
    pub fn is_paged(&self) -> bool {
        matches!(self.bins, DeviceBins::Paged(_))
    }

    /// Each window of rows a pass over the matrix launches its kernels on, in order: the whole
    /// matrix, or every page (those on the device first). Each is readable between
    /// [`enter`](Self::enter) and [`leave`](Self::leave).
    pub(super) fn sweep(&self) -> Vec<Option<usize>> {
        match &self.bins {
            DeviceBins::Paged(pages) => pages.sweep().into_iter().map(Some).collect(),
            _ => vec![None],
        }
    }

    /// Makes the rows of a window of [`sweep`](Self::sweep) readable by the work queued next
    /// on `stream` (copying a page in when no slot holds it).
    pub(super) fn enter(&self, stream: &CudaStream, page: Option<usize>) -> Result<Window> {
        match (&self.bins, page) {
            (DeviceBins::Paged(pages), Some(page)) => pages.enter(stream, page),
            _ => Ok(Window::whole(self.n_rows)),
        }
    }

    /// The work queued on `stream` so far is all that reads window `w`.
    pub(super) fn leave(&self, stream: &CudaStream, w: &Window) -> Result<()> {
        match &self.bins {
            DeviceBins::Paged(pages) => pages.leave(stream, w),
            _ => Ok(()),
        }
    }

    /// The rows of the whole matrix on the device, as the kernels of its layout take them.
    pub(super) fn rows<'a>(&'a self, p: &mut Pins<'a>) -> MatrixRows<'a> {
        self.rows_in(p, &Window::whole(self.n_rows))
    }

    /// The rows of window `w` (from [`enter`](Self::enter)) as the kernels take them.
    pub(super) fn rows_in<'a>(&'a self, p: &mut Pins<'a>, w: &Window) -> MatrixRows<'a> {
        let stride = self.stride_arg;
        let (first_row, page_rows) = (w.first_row, w.page_rows);
        match (&self.bins, &self.row_words) {
            (DeviceBins::U8(b), _) => MatrixRows::U8(DenseBins { bins: p.read(b), stride, first_row, page_rows }),
            (DeviceBins::U16(b), _) => MatrixRows::U16(DenseBins { bins: p.read(b), stride, first_row, page_rows }),
            (DeviceBins::U32(b), _) => MatrixRows::U32(DenseBins { bins: p.read(b), stride, first_row, page_rows }),
            (DeviceBins::Paged(pages), _) => {
                // The slot's bytes, read as bins of the matrix's width.
                let bins: DevPtr<'a, u8> = p.read(pages.slot(w));
                match pages.width() {
                    1 => MatrixRows::U8(DenseBins { bins, stride, first_row, page_rows }),
                    2 => MatrixRows::U16(DenseBins { bins: bins.cast(), stride, first_row, page_rows }),
                    _ => MatrixRows::U32(DenseBins { bins: bins.cast(), stride, first_row, page_rows }),
                }
            }
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

    /// Whether compressed rows may pay for `frame`: most of its values are null (Arrow's null
    /// counts), and a histogram group's start within a row fits its 16 bits.
    pub fn may_compress(frame: &FeatureFrame) -> bool {
        let (n, nf) = (frame.n_rows(), frame.n_features());
        let nulls: usize = frame.columns().iter().flat_map(|c| c.chunks()).map(|a| a.null_count()).sum();
        nf <= MAX_SPARSE_FEATURES && n > 0 && nulls * 2 >= n * nf
    }

    /// The layout for `frame` given each row's present values (`DeviceColumns::present_per_row`,
    /// None when it [cannot compress](DeviceMatrix::may_compress)): compressed rows when they
    /// take less memory than the dense bins.
    pub fn plan(frame: &FeatureFrame, cuts: &[FeatureCuts], present_per_row: Option<&[u32]>) -> Layout {
        let (n, nf) = (frame.n_rows(), frame.n_features());
        let dense = Self::dense(frame, cuts);
        let Some(present_per_row) = present_per_row else { return dense };
        let total_slots: u64 = cuts.iter().map(|c| c.n_bins() as u64 + 1).sum();
        // Slots 0..total_slots, and the padding above them.
        let entry_bytes = if total_slots < u16::MAX as u64 { 2 } else { 4 };
        let per_word = 16 / entry_bytes;
        let mut row_words = Vec::with_capacity(n + 1);
        row_words.push(0u32);
        let mut words = 0u64;
        for &present in present_per_row {
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

    /// A matrix from rows binned on the host (rows `first..first + n` of `binned`, row-major,
    /// `n_features` bins a row: a device's share of a fit over several GPUs, or all of them):
    /// uploaded as they are through pinned staging, then re-pitched on the device to rows of
    /// whole 32-bit words where they are not already (the kernels read a row's bins a word at
    /// a time). No column-major copy: the partition reads the rows.
    pub fn from_host(
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        binned: &BinnedMatrix,
        (first, n): (usize, usize),
        cuts: &[FeatureCuts],
    ) -> Result<Self> {
        let nf = binned.n_bins.len();
        let width = BinnedMatrix::bin_width(&binned.n_bins);
        let stride = nf.next_multiple_of(4 / width);
        let cells = first * nf..(first + n) * nf;
        let bins = match &binned.data {
            BinData::U8 { rows } => DeviceBins::U8(pitched(stream, memory, &rows[cells], n, nf, stride)?),
            BinData::U16 { rows } => DeviceBins::U16(pitched(stream, memory, &rows[cells], n, nf, stride)?),
            BinData::U32 { rows } => DeviceBins::U32(pitched(stream, memory, &rows[cells], n, nf, stride)?),
        };
        let tables = BinTables::upload(stream, memory, cuts)?;
        stream.synchronize().map_err(device_error)?;
        Ok(tables.into_matrix(bins, n, stride, None, None))
    }

    /// A matrix of rows binned on the host that stay there, paged to the device per `plan`
    /// ([`Pages`]): as [`from_host`](Self::from_host), but only `plan.slots` pages are ever on
    /// the device.
    pub fn paged(
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        binned: &BinnedMatrix,
        cuts: &[FeatureCuts],
        plan: PagePlan,
    ) -> Result<Self> {
        let (n, nf) = (binned.n_rows, binned.n_bins.len());
        let stride = nf.next_multiple_of(4 / BinnedMatrix::bin_width(&binned.n_bins));
        let pages = Pages::new(stream, memory, binned, stride, plan)?;
        let tables = BinTables::upload(stream, memory, cuts)?;
        stream.synchronize().map_err(device_error)?;
        Ok(tables.into_matrix(DeviceBins::Paged(Box::new(pages)), n, stride, None, None))
    }
}

/// `rows` (`n` rows of `nf` values) on the device in rows of `stride` values: uploaded whole,
/// and copied row by row into the wider pitch by one 2-D device copy when `stride > nf`.
fn pitched<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    memory: &mut DeviceMemory,
    rows: &[T],
    n: usize,
    nf: usize,
    stride: usize,
) -> Result<CudaSlice<T>> {
    use cudarc::driver::{DevicePtr, DevicePtrMut};
    let packed = memory.upload(stream, rows)?;
    if stride == nf || n == 0 {
        return Ok(packed);
    }
    let mut wide = memory.zeros::<T>(stream, n * stride)?;
    let item = std::mem::size_of::<T>();
    {
        let (src, _s) = packed.device_ptr(stream);
        let (dst, _d) = wide.device_ptr_mut(stream);
        // SAFETY: both buffers live on this stream's device; the source holds n rows of
        // nf * item bytes, the destination n rows of stride * item >= nf * item bytes.
        unsafe { repitch_rows(stream, src, nf * item, dst, stride * item, n) }?;
    }
    stream.synchronize().map_err(device_error)?;
    memory.allocated -= std::mem::size_of_val(rows);
    Ok(wide)
}

/// What binning reads besides the values, on the device: each feature's cut points
/// (flattened; a categorical feature reserves one slot per category), where each starts,
/// which features are categorical, and each feature's first histogram slot.
pub(super) struct BinTables {
    n_bins: Vec<u32>,
    slot_offsets: Vec<u32>,
    cuts: CudaSlice<f32>,
    cut_offsets: CudaSlice<u32>,
    categorical_dev: CudaSlice<u32>,
    pub(super) slot_offsets_dev: CudaSlice<u32>,
}

impl BinTables {
    pub(super) fn upload(stream: &Arc<CudaStream>, memory: &mut DeviceMemory, cuts: &[FeatureCuts]) -> Result<Self> {
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

    /// The matrix of `bins` (`n` rows, `stride` apart; compressed rows' `row_words`, the
    /// column-major copy `cols`) binned with these tables, which it keeps what it reads of.
    pub(super) fn into_matrix(
        self,
        bins: DeviceBins,
        n: usize,
        stride: usize,
        row_words: Option<CudaSlice<u32>>,
        cols: Option<CudaSlice<u8>>,
    ) -> DeviceMatrix {
        let BinTables { n_bins, slot_offsets, slot_offsets_dev, categorical_dev, .. } = self;
        DeviceMatrix {
            bins,
            n_rows: n,
            n_features: n_bins.len(),
            stride,
            row_words,
            stride_arg: stride as u32,
            cols,
            n_bins,
            slot_offsets,
            slot_offsets_dev,
            categorical_dev,
        }
    }

    /// Device bytes of the tables.
    pub(super) fn bytes(&self) -> usize {
        4 * (self.cuts.len() + self.cut_offsets.len() + self.categorical_dev.len() + self.slot_offsets_dev.len())
    }

    pub(super) fn binning(&self) -> Binning<'_> {
        Binning { cuts: &self.cuts, cut_offsets: &self.cut_offsets, categorical: &self.categorical_dev }
    }
}

/// The cut points on the device, as the binning kernels take them.
pub(super) struct Binning<'a> {
    cuts: &'a CudaSlice<f32>,
    cut_offsets: &'a CudaSlice<u32>,
    categorical: &'a CudaSlice<u32>,
}

impl<'a> Binning<'a> {
    /// The cut points as a launch's arguments hold them.
    pub(super) fn pin(&self, p: &mut Pins<'a>) -> BinCuts<'a> {
        BinCuts {
            cuts: p.read(self.cuts),
            cut_offsets: p.read(self.cut_offsets),
            categorical: p.read(self.categorical),
        }
    }
}

/// Features past which data stays dense: a histogram group's start within a compressed row
/// is kept in 16 bits (`kernels/sparse.cu`, index_groups), and a row holds up to one entry
/// per feature plus a word's padding.
const MAX_SPARSE_FEATURES: usize = 65_000;

/// Features up to which dense 8-bit bins are also kept column-major for the partition
/// ([`Layout::keeps_columns`]).
const COLUMN_COPY_MAX_FEATURES: usize = 256;

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
    /// Whether the bins are kept column-major as well ([`DeviceMatrix::cols`]): dense 8- or
    /// 16-bit bins of at most COLUMN_COPY_MAX_FEATURES features. 16-bit bins come from a
    /// column of hundreds of categories or more: the flight-delay table's 3,960 tail numbers
    /// made its partition cost as much as its histograms (1.0 s of 3.9, 16.4M rows), each row
    /// a sector of its own. 32-bit bins are rare, and keep none. The copy saves the partition
    /// a sector a row, against the histograms' `features` bins a row: on wide data it saves
    /// nothing measurable and doubles the matrix (400k x 2000: 800 MB).
    pub fn keeps_columns(&self) -> bool {
        matches!(*self, Layout::Dense { width: 1 | 2, stride } if stride <= COLUMN_COPY_MAX_FEATURES)
    }

    /// Device bytes of the matrix, every copy, for `n_rows` rows of `n_features` features.
    pub fn device_bytes(&self, n_rows: usize, n_features: usize) -> usize {
        match self {
            &Layout::Dense { width, stride } => {
                n_rows * width * (stride + if self.keeps_columns() { n_features } else { 0 })
            }
            Layout::Sparse(rows) => 16 * *rows.row_words.last().unwrap() as usize + 4 * rows.row_words.len(),
        }
    }
}
