//! Scoring rows that are already in GPU memory (another library's float32 or float64 array,
//! through the CUDA Array Interface or DLPack): the arrays are checked to lie in memory of this
//! GPU, the caller's streams waited for, and the rows converted chunk by chunk (`gather_rows`)
//! into a scratch that the kernels of rows from the host then score, writing straight into the
//! caller's output.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};

use super::GpuForest;
use crate::backend::cuda::launch::{kernel_args, launch, DevPtr, DevPtrMut, Pins};
use crate::backend::cuda::shap::ShapPaths;
use crate::backend::cuda::{device_error, knob, DeviceMemory};
use crate::error::{Error, Result};
use crate::prediction::{DeviceBinding, DeviceFloat, DeviceOut, DeviceRows, ExportArrays, PredictOutput};

/// `gather_rows` (kernels/predict.cu): `n` rows of the caller's float32 or float64 array
/// (element (r, f) at `x + (r * row_stride + f * col_stride) * 4 or 8`) into `out`,
/// column-major f32, read as `FeatureColumn::read` reads host columns.
#[repr(C)]
pub struct GatherRowsArgs<'a> {
    pub x: DevPtr<'a, u8>,
    pub row_stride: i64,
    pub col_stride: i64,
    pub n: u32,
    pub n_features: u32,
    pub is_f64: u32,
    pub has_missing: u32,
    pub missing: f32,
    pub out: DevPtrMut<'a, f32>,
}

kernel_args!(GatherRowsArgs);

/// Rows of a caller's device array converted and scored at once, at most, and the most
/// bytes their column-major f32 scratch may take (28 features: 2^20 rows in 112 MiB; 10,000
/// features: 3,355 rows).
const DEVICE_CHUNK_ROWS: usize = 1 << 20;
const DEVICE_CHUNK_BYTES: usize = 128 << 20;

/// Checks that the bytes `[first, end)` of `what` lie in one allocation of device memory that
/// the GPU of `stream` can read: not host memory, not memory CUDA does not know (a pointer
/// from nowhere), not another GPU's, and not past the allocation's end. With this, a kernel
/// never reads or writes outside memory the caller's array owns.
fn check_device_memory(stream: &CudaStream, what: &str, first: u64, end: u64) -> Result<()> {
    use cudarc::driver::sys::{self, CUmemorytype, CUpointer_attribute as A, CUresult};
    let ctx = stream.context();
    ctx.bind_to_thread().map_err(device_error)?;
    fn attribute<T: Default>(attr: A, ptr: u64) -> std::result::Result<T, CUresult> {
        let mut value = T::default();
        // SAFETY: `value` has the size the attribute's documentation gives (u32 for the
        // memory type and the managed flag, i32 for the ordinal, u64 for the range).
        let r = unsafe { sys::cuPointerGetAttribute(&mut value as *mut T as *mut std::ffi::c_void, attr, ptr) };
        match r {
            CUresult::CUDA_SUCCESS => Ok(value),
            e => Err(e),
        }
    }
    let memory_type = attribute::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, first).map_err(|e| {
        Error::data(format!(
            "{what} is not memory CUDA knows (its address {first:#x} gave {e:?}): pass an array in GPU memory \
             (cupy, torch on \"cuda\", JAX on a GPU)"
        ))
    })?;
    if memory_type == CUmemorytype::CU_MEMORYTYPE_HOST as u32 {
        return Err(Error::data(format!(
            "{what} is in host memory (pinned), not on the GPU; score a Polars frame for data on the host"
        )));
    }
    let managed = attribute::<u32>(A::CU_POINTER_ATTRIBUTE_IS_MANAGED, first).unwrap_or(0) != 0;
    if !managed {
        let ordinal = attribute::<i32>(A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, first)
            .map_err(|e| Error::data(format!("{what}: CUDA could not tell its GPU ({e:?})")))?;
        if ordinal as usize != ctx.ordinal() {
            return Err(Error::data(format!(
                "{what} is on GPU {ordinal}, and polars-gbt scores on GPU {}: move the array there \
                 (or make that GPU the first visible one with CUDA_VISIBLE_DEVICES)",
                ctx.ordinal()
            )));
        }
    }
    let start = attribute::<u64>(A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, first)
        .map_err(|e| Error::data(format!("{what}: CUDA could not tell its allocation ({e:?})")))?;
    let size = attribute::<u64>(A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, first)
        .map_err(|e| Error::data(format!("{what}: CUDA could not tell its allocation's size ({e:?})")))?;
    if first < start || end > start.saturating_add(size) {
        return Err(Error::data(format!(
            "{what}'s shape and strides reach bytes {first:#x}..{end:#x}, past its allocation \
             ({start:#x}..{:#x})",
            start.saturating_add(size)
        )));
    }
    Ok(())
}

impl GpuForest {
    /// Queues the conversion of rows `start..start + n` of `rows` into `x` (column-major f32,
    /// as the kernels read it).
    fn gather_rows(
        &self,
        stream: &Arc<CudaStream>,
        rows: &DeviceRows,
        start: usize,
        n: usize,
        missing: Option<f32>,
        x: &mut CudaSlice<f32>,
    ) -> Result<()> {
        let item = rows.dtype.bytes() as i64;
        // The first row's address: the strides may be negative, the span was checked whole.
        let first = (rows.ptr as i64).wrapping_add(start as i64 * rows.row_stride * item) as u64;
        let mut p = Pins::new(stream);
        let args = GatherRowsArgs {
            // SAFETY: `check_device_memory` found every element of `rows` in the caller's
            // allocation on this GPU; the caller keeps it alive until the call returns, which
            // waits for this launch.
            x: unsafe { DevPtr::foreign(first) },
            row_stride: rows.row_stride,
            col_stride: rows.col_stride,
            n: n as u32,
            n_features: self.n_features,
            is_f64: (rows.dtype == DeviceFloat::F64) as u32,
            has_missing: missing.is_some() as u32,
            missing: missing.unwrap_or(0.0),
            out: p.write(x),
        };
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(32) as u32, self.n_features.div_ceil(32), 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the struct mirrors kernels/predict.cu (the layout probe); the kernel reads
        // element (r, f) for r < n, f < n_features, all within the checked span, and writes
        // `x`'s first n * n_features values (it holds DEVICE_CHUNK_ROWS rows of each).
        unsafe { launch(stream, &self.rt.kernels.gather_rows, &args, cfg) }
    }

    /// [`Predictor::predict_device`](crate::backend::Predictor::predict_device) for this
    /// forest: the rows chunk by chunk through `gather_rows` into a scratch, then the same
    /// kernels as rows from the host, writing straight into the caller's output.
    pub(super) fn score_device(
        &self,
        output: PredictOutput,
        missing: Option<f32>,
        export: &mut ExportArrays<'_>,
    ) -> Result<()> {
        let stream = self.rt.stream.context().new_stream().map_err(device_error)?;
        let DeviceBinding { rows, out, wait_for } = export(stream.cu_stream() as u64)?;
        self.check_shape(&rows)?;
        if rows.rows == 0 {
            return Ok(());
        }
        check_arrays(&stream, &rows, &out)?;
        wait_for_producers(&stream, &wait_for)?;
        let mut scoring = DeviceScoring::new(self, &stream, &rows, out.ptr, output, missing)?;
        // Also after an error: nothing queued may outlive the scratch or the caller's arrays.
        let queued = scoring.queue();
        let done = stream.synchronize().map_err(device_error);
        queued.and(done)
    }

    /// Checks that `rows` has the model's features, as many as a launch's grid takes.
    fn check_shape(&self, rows: &DeviceRows) -> Result<()> {
        let nf = self.n_features as usize;
        if rows.cols != nf {
            return Err(Error::data(format!("the array has {} columns; the model has {nf} features", rows.cols)));
        }
        if nf > 65535 * 32 {
            return Err(Error::data(format!("{nf} features are more than device arrays take (2,097,120)")));
        }
        Ok(())
    }
}

/// Checks that the caller's `rows` and `out` lie in memory of the GPU of `stream`, aligned to
/// their elements ([`check_device_memory`]).
fn check_arrays(stream: &CudaStream, rows: &DeviceRows, out: &DeviceOut) -> Result<()> {
    let (first, end) =
        rows.byte_span().ok_or_else(|| Error::data("the array's shape and strides overflow its address space"))?;
    check_device_memory(stream, "the array", first, end)?;
    if !rows.ptr.is_multiple_of(rows.dtype.bytes() as u64) {
        return Err(Error::data("the array's data is not aligned to its element size"));
    }
    let out_end = out.ptr.checked_add(out.len as u64 * 4).ok_or_else(|| Error::data("the output overflows"))?;
    if out.len > 0 {
        // (None for the leaves of a forest without trees.)
        check_device_memory(stream, "the output array", out.ptr, out_end)?;
    }
    if !out.ptr.is_multiple_of(4) {
        return Err(Error::data("the output array is not aligned to four bytes"));
    }
    Ok(())
}

/// Makes `stream` wait for the caller's queued work on its arrays (CUDA Array Interface's
/// `stream`): `wait_for` holds the caller's stream handles.
fn wait_for_producers(stream: &Arc<CudaStream>, wait_for: &[u64]) -> Result<()> {
    let ctx = stream.context();
    for &handle in wait_for {
        let event = ctx.new_event(None).map_err(device_error)?;
        ctx.bind_to_thread().map_err(device_error)?;
        // SAFETY: the handle is a stream of this context (or 1, 2: CUDA's default streams),
        // as the array's producer states; the event is ours.
        let r =
            unsafe { cudarc::driver::sys::cuEventRecord(event.cu_event(), handle as cudarc::driver::sys::CUstream) };
        if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(Error::data(format!(
                "the array's stream {handle:#x} (its __cuda_array_interface__'s) is not a stream of this GPU: {r:?}"
            )));
        }
        stream.wait(&event).map_err(device_error)?;
    }
    Ok(())
}

/// One call's scoring of a caller's device rows into its output at `out`: the scratch the
/// rows are converted into, and what the kernels need besides.
struct DeviceScoring<'f> {
    forest: &'f GpuForest,
    stream: &'f Arc<CudaStream>,
    rows: &'f DeviceRows,
    out: u64,
    output: PredictOutput,
    missing: Option<f32>,
    /// The forest's SHAP paths, for SHAP outputs.
    shap: Option<Arc<ShapPaths>>,
    /// Whether the output is each row's class (margins first, then the class chosen).
    classes: bool,
    /// Rows converted and scored at once.
    chunk: usize,
    x: CudaSlice<f32>,
    scratch: CudaSlice<u8>,
    /// Margins of class and leaf outputs (the leaf kernels write none).
    margins: CudaSlice<f32>,
}

impl<'f> DeviceScoring<'f> {
    fn new(
        forest: &'f GpuForest,
        stream: &'f Arc<CudaStream>,
        rows: &'f DeviceRows,
        out: u64,
        output: PredictOutput,
        missing: Option<f32>,
    ) -> Result<Self> {
        let (nf, k) = (forest.n_features as usize, forest.n_outputs as usize);
        let chunk = knob::<usize>("POLARS_GBT_DEVICE_CHUNK_ROWS")
            .unwrap_or(DEVICE_CHUNK_ROWS.min(DEVICE_CHUNK_BYTES / (nf.max(1) * 4)))
            .clamp(1, rows.rows);
        let mut memory = DeviceMemory::default();
        let x = memory.zeros::<f32>(stream, chunk * nf)?;
        let shap = match output {
            PredictOutput::Contrib | PredictOutput::Interaction => Some(forest.shap_paths()?),
            _ => None,
        };
        let classes =
            output == PredictOutput::Class || (output == PredictOutput::Value && forest.objective.predicts_classes());
        let (scratch, margins) = match shap {
            Some(_) => (memory.zeros::<u8>(stream, 1)?, memory.zeros::<f32>(stream, 1)?),
            None => (
                memory.zeros::<u8>(stream, forest.scratch_bytes(chunk).max(1))?,
                memory.zeros::<f32>(stream, if classes || output == PredictOutput::Leaf { chunk * k } else { 1 })?,
            ),
        };
        Ok(DeviceScoring { forest, stream, rows, out, output, missing, shap, classes, chunk, x, scratch, margins })
    }

    /// Queues every chunk's conversion and scoring.
    ///
    /// SAFETY (every `foreign` in the chunks' steps): the output was checked to lie in the
    /// caller's allocation on this GPU, `out.len` values of four bytes, and
    /// `Model::predict_device` checked that it holds the rows' values of this output; each
    /// chunk writes its own rows' values only, and the call waits for them before it returns.
    fn queue(&mut self) -> Result<()> {
        let n = self.rows.rows;
        for start in (0..n).step_by(self.chunk) {
            let rows = self.chunk.min(n - start);
            self.forest.gather_rows(self.stream, self.rows, start, rows, self.missing, &mut self.x)?;
            if let Some(paths) = &self.shap {
                self.shap_chunk(paths, start, rows)?;
            } else if self.output == PredictOutput::Leaf {
                self.leaf_chunk(start, rows)?;
            } else if self.classes {
                self.class_chunk(start, rows)?;
            } else {
                self.value_chunk(start, rows)?;
            }
        }
        Ok(())
    }

    /// SHAP values of `rows` rows from row `start`: the output zeroed, the paths' values added,
    /// and the bias elements set.
    fn shap_chunk(&self, paths: &ShapPaths, start: usize, rows: usize) -> Result<()> {
        let (nf, k) = (self.forest.n_features as usize, self.forest.n_outputs as usize);
        let raw = self.stream.cu_stream();
        let interactions = self.output == PredictOutput::Interaction;
        let m = nf + 1;
        let block = if interactions { m * m } else { m };
        let width = k * block;
        let at = self.out + (start * width * 4) as u64;
        // SAFETY: as in `queue`; `rows * width` values from `at`.
        let r = unsafe { cudarc::driver::sys::cuMemsetD32Async(at, 0, rows * width, raw) };
        if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            return Err(Error::Device(format!("CUDA error: zeroing the output: {r:?}")));
        }
        // SAFETY: as in `queue`.
        paths.launch_rows(self.stream, &self.x, rows, interactions, width, unsafe { DevPtrMut::foreign(at) })?;
        // The bias elements, one column of the row-major output per output.
        let corner = if interactions { nf * m + nf } else { nf };
        for (o, bias) in paths.bias_values(&self.forest.base_host).into_iter().enumerate() {
            let column = at + ((o * block + corner) * 4) as u64;
            // SAFETY: `rows` values `width * 4` bytes apart from `column`, all within this
            // chunk's rows.
            let r = unsafe { cudarc::driver::sys::cuMemsetD2D32Async(column, width * 4, bias.to_bits(), 1, rows, raw) };
            if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS {
                return Err(Error::Device(format!("CUDA error: writing the SHAP bias: {r:?}")));
            }
        }
        Ok(())
    }

    /// Each tree's leaf id of `rows` rows from row `start`.
    fn leaf_chunk(&mut self, start: usize, rows: usize) -> Result<()> {
        let forest = self.forest;
        let at = self.out + (start * forest.n_trees as usize * 4) as u64;
        let mut p = Pins::new(self.stream);
        let margin = p.write(&mut self.margins);
        // SAFETY: as in `queue`.
        let leaf = unsafe { DevPtrMut::foreign(at) };
        forest.launch_to(self.stream, &self.x, rows, DevPtr::NULL, margin, leaf, &mut self.scratch)
    }

    /// The class of `rows` rows from row `start`: margins into the scratch, then chosen.
    fn class_chunk(&mut self, start: usize, rows: usize) -> Result<()> {
        let forest = self.forest;
        let at = self.out + (start * 4) as u64;
        {
            let mut p = Pins::new(self.stream);
            let margin = p.write(&mut self.margins);
            forest.launch_to(self.stream, &self.x, rows, DevPtr::NULL, margin, DevPtrMut::NULL, &mut self.scratch)?;
        }
        let mut p = Pins::new(self.stream);
        let margin = p.write(&mut self.margins);
        // SAFETY: as in `queue`.
        forest.finish_to(self.stream, margin, rows, unsafe { DevPtrMut::foreign(at) })
    }

    /// The margins of `rows` rows from row `start`, straight into the output, and their link
    /// for values.
    fn value_chunk(&mut self, start: usize, rows: usize) -> Result<()> {
        let forest = self.forest;
        let at = self.out + (start * forest.n_outputs as usize * 4) as u64;
        // SAFETY: as in `queue`.
        let margin = unsafe { DevPtrMut::foreign(at) };
        forest.launch_to(self.stream, &self.x, rows, DevPtr::NULL, margin, DevPtrMut::NULL, &mut self.scratch)?;
        if self.output == PredictOutput::Value {
            // SAFETY: as in `queue`.
            forest.finish_to(self.stream, unsafe { DevPtrMut::foreign(at) }, rows, DevPtrMut::NULL)?;
        }
        Ok(())
    }
}
