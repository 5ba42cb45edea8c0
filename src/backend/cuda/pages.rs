//! A training matrix paged from host memory: for a fit whose bins do not fit the GPU (or the
//! fit's `max_device_memory`), the rows binned on the host stay there, page-locked in place,
//! and go to the device a page of rows at a time, into a few device slots, on a copy stream
//! of their own, as each pass over the rows (a level's partition, its children's histograms,
//! a tree's margin update) reaches them. The kernels read a page as they read the whole
//! matrix (`DenseBins` in kernels/common.cuh: rows `first_row..` of a page, others skipped), so
//! the trees are the in-core fit's, byte for byte.
//!
//! A pass takes the pages already on the device first, then the others, each into the slot
//! used longest ago, its copy queued behind the kernels that last read the slot and ahead of
//! the kernels that read it: with `S` slots a pass copies all but `S` pages, and the copy of
//! one page overlaps the kernels of the one before.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use super::transfer::repitch_rows;
use super::{device_error, DeviceMemory};
use crate::data::binned::BinData;
use crate::data::BinnedMatrix;
use crate::error::{Error, Result};

/// Page slots a paged fit keeps at least: one copied while another is read.
pub const MIN_SLOTS: usize = 2;
/// The smallest page worth a copy and a launch of every pass's kernels.
const MIN_PAGE_BYTES: usize = 1 << 20;
/// Pages are at most this large, so that a budget holds several and their copies overlap.
const MAX_PAGE_BYTES: usize = 256 << 20;

/// How many rows a page holds and how many pages the device keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePlan {
    pub page_rows: usize,
    pub slots: usize,
}

impl PagePlan {
    /// Pages of `row_bytes`-byte rows (on the device) for `n` rows within `budget` bytes, or
    /// None when not even [`MIN_SLOTS`] small pages fit. (Bins that fit the budget whole are
    /// one page, in one slot: such a fit is not paged, `placement::place_bins`.)
    pub fn within(n: usize, row_bytes: usize, budget: usize) -> Option<Self> {
        let row_bytes = row_bytes.max(1);
        // A few slots of a size that divides the budget, between the bounds.
        let page_bytes = (budget / 8).clamp(MIN_PAGE_BYTES, MAX_PAGE_BYTES);
        let page_rows = (page_bytes / row_bytes).clamp(1, n.max(1));
        let slots = budget / (page_rows * row_bytes);
        (slots >= MIN_SLOTS).then(|| PagePlan { page_rows, slots: slots.min(n.div_ceil(page_rows)) })
    }

    pub fn n_pages(&self, n: usize) -> usize {
        n.div_ceil(self.page_rows)
    }
}

/// The host rows a paged matrix reads: the bins of a `BinnedMatrix`, which the fit borrows for
/// as long as the learner lives (`GpuLearner::from_binned`), page-locked while paged.
struct HostRows {
    ptr: *const u8,
    bytes: usize,
    /// Whether `cuMemHostRegister` pinned them (if it could not, copies run from pageable
    /// memory, at a fraction of the link's speed).
    pinned: bool,
    ctx: Arc<CudaContext>,
}

// SAFETY: the rows are only read (by the copy engine and `Pages::load`), and the borrow they
// come from outlives the learner that owns them.
unsafe impl Send for HostRows {}

impl HostRows {
    fn new(ctx: &Arc<CudaContext>, bins: &[u8]) -> Self {
        let pinned = ctx.bind_to_thread().is_ok()
            // SAFETY: `bins` is valid for `bins.len()` bytes for the learner's life; the
            // registration only locks its pages and is undone in Drop.
            && unsafe { sys::cuMemHostRegister_v2(bins.as_ptr() as *mut _, bins.len(), 0) }.result().is_ok();
        HostRows { ptr: bins.as_ptr(), bytes: bins.len(), pinned, ctx: ctx.clone() }
    }
}

impl Drop for HostRows {
    fn drop(&mut self) {
        if self.pinned && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: registered in `new`, and every copy out of it has finished (the learner's
            // stream and the copy stream are synchronised when its matrix drops: `Pages`).
            let _ = unsafe { sys::cuMemHostUnregister(self.ptr as *mut _) };
        }
    }
}

/// Which page each slot holds, and the events that order the copy stream and the fit's.
struct SlotState {
    holds: Vec<Option<usize>>,
    last_use: Vec<u64>,
    /// Recorded on the copy stream after a slot's page is copied in.
    loaded: Vec<CudaEvent>,
    /// Recorded on the fit's stream after the work reading a slot was queued.
    used: Vec<CudaEvent>,
    clock: u64,
    /// Bytes copied to the device, for the profile.
    copied: u64,
}

pub struct Pages {
    host: HostRows,
    /// Bytes a value, bins a host row, bins a device row (whole 32-bit words).
    width: usize,
    nf: usize,
    stride: usize,
    n_rows: usize,
    page_rows: usize,
    slots: Vec<CudaSlice<u8>>,
    /// A page as the host lays it out, re-pitched into its slot on the device when the
    /// device rows are wider.
    staging: Option<CudaSlice<u8>>,
    copy: Arc<CudaStream>,
    state: RefCell<SlotState>,
}

/// A run of rows a kernel reads: the whole matrix, or one page in one slot.
#[derive(Clone)]
pub struct Window {
    /// The slot holding the page (0 for the whole matrix).
    pub(super) slot: usize,
    /// The matrix's rows it holds.
    pub rows: Range<usize>,
    /// As `DenseBins` takes them: the first row, and how many (ALL_ROWS for the whole).
    pub(super) first_row: u32,
    pub(super) page_rows: u32,
}

/// `DenseBins::page_rows` of the whole matrix (`ALL_ROWS` in kernels/common.cuh).
pub const ALL_ROWS: u32 = u32::MAX;

impl Window {
    pub fn whole(n_rows: usize) -> Self {
        Window { slot: 0, rows: 0..n_rows, first_row: 0, page_rows: ALL_ROWS }
    }

    /// The same rows, read by kernels that index them from 0 (the margin update, which
    /// walks each row of the window and writes the window's part of the margins).
    pub fn from_zero(&self) -> Self {
        Window { first_row: 0, page_rows: ALL_ROWS, ..self.clone() }
    }
}

impl Pages {
    /// Pages of `binned`'s rows per `plan`, device rows `stride` bins wide; the slots are
    /// allocated on `stream`'s device and counted in `memory`.
    pub fn new(
        stream: &Arc<CudaStream>,
        memory: &mut DeviceMemory,
        binned: &BinnedMatrix,
        stride: usize,
        plan: PagePlan,
    ) -> Result<Self> {
        let (n, nf) = (binned.n_rows, binned.n_bins.len());
        let width = BinnedMatrix::bin_width(&binned.n_bins);
        let bytes: &[u8] = match &binned.data {
            BinData::U8 { rows } => rows,
            // SAFETY: plain integers, read as their bytes.
            BinData::U16 { rows } => unsafe { std::slice::from_raw_parts(rows.as_ptr() as *const u8, 2 * rows.len()) },
            BinData::U32 { rows } => unsafe { std::slice::from_raw_parts(rows.as_ptr() as *const u8, 4 * rows.len()) },
        };
        let ctx = stream.context();
        let slot_bytes = plan.page_rows * stride * width;
        let slots = (0..plan.slots).map(|_| memory.zeros::<u8>(stream, slot_bytes)).collect::<Result<Vec<_>>>()?;
        let staging = match stride == nf {
            true => None,
            false => Some(memory.zeros::<u8>(stream, plan.page_rows * nf * width)?),
        };
        let event = || ctx.new_event(None).map_err(device_error);
        let state = SlotState {
            holds: vec![None; plan.slots],
            last_use: vec![0; plan.slots],
            loaded: (0..plan.slots).map(|_| event()).collect::<Result<_>>()?,
            used: (0..plan.slots).map(|_| event()).collect::<Result<_>>()?,
            clock: 0,
            copied: 0,
        };
        Ok(Pages {
            host: HostRows::new(ctx, bytes),
            width,
            nf,
            stride,
            n_rows: n,
            page_rows: plan.page_rows,
            slots,
            staging,
            copy: ctx.new_stream().map_err(device_error)?,
            state: RefCell::new(state),
        })
    }

    pub fn n_pages(&self) -> usize {
        self.n_rows.div_ceil(self.page_rows)
    }

    /// Bytes a bin.
    pub fn width(&self) -> usize {
        self.width
    }

    pub fn n_slots(&self) -> usize {
        self.slots.len()
    }

    pub fn slot_bytes(&self) -> usize {
        self.slots.iter().map(CudaSlice::len).sum::<usize>() + self.staging.as_ref().map_or(0, CudaSlice::len)
    }

    pub fn is_pinned(&self) -> bool {
        self.host.pinned
    }

    /// Bytes copied to the device so far.
    pub fn copied(&self) -> u64 {
        self.state.borrow().copied
    }

    /// Every page, in the order a pass takes them: those on the device first.
    pub fn sweep(&self) -> Vec<usize> {
        let st = self.state.borrow();
        let mut resident: Vec<(u64, usize)> =
            st.holds.iter().zip(&st.last_use).filter_map(|(h, &t)| h.map(|p| (t, p))).collect();
        resident.sort_unstable();
        let mut order: Vec<usize> = resident.iter().map(|&(_, p)| p).collect();
        order.extend((0..self.n_pages()).filter(|p| !st.holds.contains(&Some(*p))));
        order
    }

    /// Makes `page` readable by the work queued next on `stream`: copies it into the slot
    /// used longest ago unless a slot holds it.
    pub fn enter(&self, stream: &CudaStream, page: usize) -> Result<Window> {
        let mut st = self.state.borrow_mut();
        st.clock += 1;
        let slot = match st.holds.iter().position(|h| *h == Some(page)) {
            Some(s) => s,
            None => {
                let s = (0..self.slots.len()).min_by_key(|&s| st.last_use[s]).expect("a paged matrix has slots");
                // The kernels that read the slot's last page come before its next copy.
                self.copy.wait(&st.used[s]).map_err(device_error)?;
                st.copied += self.load(page, s)? as u64;
                st.loaded[s].record(&self.copy).map_err(device_error)?;
                st.holds[s] = Some(page);
                s
            }
        };
        st.last_use[slot] = st.clock;
        stream.wait(&st.loaded[slot]).map_err(device_error)?;
        let rows = self.rows_of(page);
        Ok(Window { slot, first_row: rows.start as u32, page_rows: rows.len() as u32, rows })
    }

    /// The work queued on `stream` reads `w`'s slot: its next copy waits for that work.
    pub fn leave(&self, stream: &CudaStream, w: &Window) -> Result<()> {
        self.state.borrow().used[w.slot].record(stream).map_err(device_error)
    }

    /// The device slot holding `w`'s page (its bytes: bins of the matrix's width).
    pub fn slot(&self, w: &Window) -> &CudaSlice<u8> {
        &self.slots[w.slot]
    }

    fn rows_of(&self, page: usize) -> Range<usize> {
        let start = page * self.page_rows;
        start..(start + self.page_rows).min(self.n_rows)
    }

    /// Queues the copy of `page` into slot `s` on the copy stream; returns its bytes.
    fn load(&self, page: usize, s: usize) -> Result<usize> {
        let rows = self.rows_of(page);
        let host_row = self.nf * self.width;
        let (from, len) = (rows.start * host_row, rows.len() * host_row);
        debug_assert!(from + len <= self.host.bytes);
        let stream = self.copy.cu_stream();
        let (slot, _s) = self.slots[s].device_ptr(&self.copy);
        let target = self.staging.as_ref().map(|st| st.device_ptr(&self.copy).0).unwrap_or(slot);
        // SAFETY: the host rows hold the page's bytes for the learner's life; the target holds
        // a page (the slot, or the staging buffer of the host's narrower rows), and no kernel
        // reads it until `loaded` (the slot's previous readers were waited for in `enter`).
        unsafe { sys::cuMemcpyHtoDAsync_v2(target, self.host.ptr.add(from) as *const _, len, stream) }
            .result()
            .map_err(device_error)?;
        if self.staging.is_some() {
            // SAFETY: the staging buffer holds the page's rows of host_row bytes, the slot as
            // many of stride * width >= host_row; both on the copy stream's device, in order.
            unsafe { repitch_rows(&self.copy, target, host_row, slot, self.stride * self.width, rows.len()) }?;
        }
        Ok(len)
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // Copies in flight read the host rows, which are unregistered next.
        let _ = self.copy.synchronize();
    }
}

/// Why a fit's bins cannot be paged within `budget` bytes.
pub fn too_small(budget: usize, row_state: usize) -> Error {
    const MIB: f64 = (1 << 20) as f64;
    Error::param(
        "max_device_memory",
        format!(
            "{:.0} MiB is too small for this fit: its per-row state alone takes {:.0} MiB on the GPU, and paging \
             its bins needs {} pages of at least {:.0} MiB besides",
            budget as f64 / MIB,
            row_state as f64 / MIB,
            MIN_SLOTS,
            MIN_PAGE_BYTES as f64 / MIB
        ),
    )
}

/// Why a fit cannot even page its bins in what the GPU has free (no `max_device_memory`).
pub fn no_room(free: usize, row_state: usize) -> Error {
    const MIB: f64 = (1 << 20) as f64;
    Error::Device(format!(
        "the GPU is out of memory: this fit's per-row state takes {:.0} MiB, and paging its bins from host memory needs \
         {} pages of at least {:.0} MiB besides, and {:.0} MiB are free; use fewer rows, or device=\"cpu\"",
        row_state as f64 / MIB,
        MIN_SLOTS,
        MIN_PAGE_BYTES as f64 / MIB,
        free as f64 / MIB
    ))
}
