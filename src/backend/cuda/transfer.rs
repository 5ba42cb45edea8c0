//! Host-to-device copies in bulk: whatever is large (the feature columns' Arrow buffers, a
//! fit's labels and margins) goes through two pinned staging buffers that take turns, each
//! filled by every thread with plain memcpy while the other's DMA runs, so the link runs near
//! its pinned speed rather than the driver's pageable one (55 against 9 GB/s on the H100 host
//! measured in docs/benchmarks.md). Small copies go from pageable memory: pinning costs more.
//! Rows uploaded packed are widened to the kernels' row pitch on the device ([`repitch_rows`]).

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, CudaViewMut, PinnedHostSlice};
use rayon::prelude::*;

use super::device_error;
use crate::error::Result;

/// Bytes moved through one pinned staging buffer at a time (two take turns).
const STAGE_BYTES: usize = 16 << 20;
/// Host copies into a staging buffer are split into pieces of this size, one per thread.
const COPY_PIECE: usize = 1 << 20;
/// Copies of at most this many bytes go from pageable memory.
pub const SMALL_BYTES: usize = 4 << 20;

/// A host buffer bound for a device buffer at byte `at`.
pub struct Piece<'a> {
    pub bytes: &'a [u8],
    pub at: usize,
}

/// Copies each piece (in ascending `at`, apart) into `dst`, whose first `end` bytes they lay
/// out, on `stream`, and waits for it.
pub fn copy_pieces(
    stream: &Arc<CudaStream>,
    pieces: &[Piece],
    dst: &mut CudaViewMut<'_, u8>,
    end: usize,
) -> Result<()> {
    if end <= SMALL_BYTES {
        let mut host = vec![0u8; end];
        fill_stage(&mut host, 0, pieces);
        stream.memcpy_htod(&host, &mut dst.slice_mut(0..end)).map_err(device_error)?;
        return stream.synchronize().map_err(device_error);
    }
    let ctx = stream.context();
    let mut stages: Vec<(PinnedHostSlice<u8>, CudaEvent)> = Vec::with_capacity(2);
    for _ in 0..2 {
        stages.push((take_stage(ctx)?, ctx.new_event(None).map_err(device_error)?));
    }
    for (i, start) in (0..end).step_by(STAGE_BYTES).enumerate() {
        let len = STAGE_BYTES.min(end - start);
        let (host, done) = &mut stages[i % 2];
        done.synchronize().map_err(device_error)?;
        let stage = &mut host.as_mut_slice().map_err(device_error)?[..len];
        fill_stage(stage, start, pieces);
        stream.memcpy_htod(&*stage, &mut dst.slice_mut(start..start + len)).map_err(device_error)?;
        done.record(stream).map_err(device_error)?;
    }
    stream.synchronize().map_err(device_error)?;
    for (host, _) in stages {
        give_back(ctx.ordinal(), host);
    }
    Ok(())
}

/// Staging buffers kept for the process, by GPU (pinned memory is pinned for the context that
/// allocated it): allocating and freeing them for every copy cost milliseconds each, and the
/// driver serialises it across the GPUs of a fit over several, all ingesting at once.
static KEPT_STAGES: Mutex<Vec<(usize, PinnedHostSlice<u8>)>> = Mutex::new(Vec::new());
/// At most this many kept a GPU (two a copy; more while several fits share the GPU).
const KEPT_PER_GPU: usize = 4;

fn take_stage(ctx: &Arc<CudaContext>) -> Result<PinnedHostSlice<u8>> {
    let ordinal = ctx.ordinal();
    let mut kept = KEPT_STAGES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = kept.iter().position(|(o, _)| *o == ordinal) {
        return Ok(kept.swap_remove(i).1);
    }
    drop(kept);
    // SAFETY: a staging buffer is written on the host only after its event says the DMA out
    // of it finished, and kept only once its copies have finished.
    unsafe { ctx.alloc_pinned::<u8>(STAGE_BYTES) }.map_err(device_error)
}

fn give_back(ordinal: usize, host: PinnedHostSlice<u8>) {
    let mut kept = KEPT_STAGES.lock().unwrap_or_else(|p| p.into_inner());
    if kept.iter().filter(|(o, _)| *o == ordinal).count() < KEPT_PER_GPU {
        kept.push((ordinal, host));
    }
}

/// Fills `stage` (the arena's bytes from `start` on) from the pieces it overlaps, one thread a
/// [`COPY_PIECE`] of it.
fn fill_stage(stage: &mut [u8], start: usize, pieces: &[Piece]) {
    stage.par_chunks_mut(COPY_PIECE).enumerate().for_each(|(k, out)| {
        let from = start + k * COPY_PIECE;
        let to = from + out.len();
        // The pieces are in arena order; the first that ends after `from`.
        let first = pieces.partition_point(|p| p.at + p.bytes.len() <= from);
        for p in pieces[first..].iter().take_while(|p| p.at < to) {
            let (lo, hi) = (p.at.max(from), (p.at + p.bytes.len()).min(to));
            out[lo - from..hi - from].copy_from_slice(&p.bytes[lo - p.at..hi - p.at]);
        }
    });
}

/// Queues on `stream` the copy of `rows` rows of `src_pitch` bytes at `src` into rows of
/// `dst_pitch` bytes at `dst` (device memory both), each row's first `src_pitch` bytes.
///
/// # Safety
/// `src` must hold `rows * src_pitch` bytes and `dst` `rows * dst_pitch >= rows * src_pitch`,
/// on `stream`'s device, neither used by other work until the copy is done.
pub(super) unsafe fn repitch_rows(
    stream: &CudaStream,
    src: cudarc::driver::sys::CUdeviceptr,
    src_pitch: usize,
    dst: cudarc::driver::sys::CUdeviceptr,
    dst_pitch: usize,
    rows: usize,
) -> Result<()> {
    use cudarc::driver::sys;
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: src_pitch,
        Height: rows,
    };
    // SAFETY: as the caller promises.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result().map_err(device_error)
}
