//! Host and device buffers of a GPU fit: the fit's view of the device ([`FitDevice`]: stream,
//! counted allocations, pinned upload arena), growable device scratch buffers, and the pool of
//! node histograms.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PinnedHostSlice,
    ValidAsZeroBits,
};

use super::launch::{self, grid_for, Kernel, KernelArgs, Pins};
use super::layout::GradSum;
use super::runtime::Runtime;
use super::{device_error, DeviceMemory};
use crate::collective::DeviceSums;
use crate::error::Result;

/// The device as one fit uses it: the runtime's kernels, the fit's stream, its counted
/// allocations, and the pinned arena its small uploads go through. Every component of a fit
/// takes it by `&mut` to allocate, upload, launch and download. A fit's buffers are used on its
/// stream only (cudarc's cross-stream events are off: `Runtime::start`).
pub(super) struct FitDevice<'r> {
    pub(super) rt: &'r Runtime,
    pub(super) stream: Arc<CudaStream>,
    pub(super) memory: DeviceMemory,
    pub(super) arena: UploadArena,
    /// In a fit over several GPUs: the collective whose exchanges are queued on the stream
    /// without a wait. Every read back waits through it (within its deadline, watching the
    /// peers), never in a plain stream synchronisation that a dead peer would hang.
    pub(super) watch: Option<&'r dyn DeviceSums>,
    /// With POLARS_GBT_PROFILE=calls: what the host spends on the device's calls.
    pub(super) calls: Option<CallCounts>,
}

/// The host's side of a fit's device calls (POLARS_GBT_PROFILE=calls), without the stage laps'
/// synchronisations: how many launches, small uploads and read-backs, the seconds spent queueing
/// them, and the seconds blocked in read-backs (the device still busy). What is left of the fit
/// is the host's own work, during which the device may run dry.
pub(super) struct CallCounts {
    /// Since the training matrix was ready, and the trees grown since.
    pub(super) since: Instant,
    pub(super) trees: u64,
    /// A `Cell`: launches take the device by `&`.
    launches: Cell<Tally>,
    uploads: Tally,
    downloads: Tally,
}

/// Calls of one kind: how many, and the host's seconds in them.
#[derive(Clone, Copy, Default)]
struct Tally {
    calls: u64,
    seconds: f64,
}

impl Tally {
    /// This tally with one more call, begun at `started`.
    fn plus(self, started: Instant) -> Tally {
        Tally { calls: self.calls + 1, seconds: self.seconds + started.elapsed().as_secs_f64() }
    }
}

impl CallCounts {
    fn new() -> Self {
        let none = Tally::default();
        CallCounts { since: Instant::now(), trees: 0, launches: Cell::new(none), uploads: none, downloads: none }
    }

    /// A line for the profile, with per-tree figures.
    pub(super) fn summary(&self) -> String {
        let trees = self.trees.max(1) as f64;
        let per_tree = |t: Tally| (t.calls as f64 / trees, 1e3 * t.seconds / trees);
        let elapsed = self.since.elapsed().as_secs_f64();
        let (launches, launch_ms) = per_tree(self.launches.get());
        let (uploads, upload_ms) = per_tree(self.uploads);
        let (downloads, download_ms) = per_tree(self.downloads);
        format!(
            "{} trees in {elapsed:.3} s; a tree: {:.3} ms, {launches:.1} launches ({launch_ms:.3} ms queueing), \
             {uploads:.1} uploads ({upload_ms:.3} ms), {downloads:.1} read-backs ({download_ms:.3} ms blocked)",
            self.trees,
            1e3 * elapsed / trees,
        )
    }
}

/// When `calls` is counting: now, the start of a call to count.
fn start(calls: &Option<CallCounts>) -> Option<Instant> {
    calls.is_some().then(Instant::now)
}

impl<'r> FitDevice<'r> {
    pub(super) fn new(rt: &'r Runtime, stream: Arc<CudaStream>) -> Result<Self> {
        let arena = UploadArena::new(rt, &stream)?;
        let calls = crate::profile::calls_on().then(CallCounts::new);
        Ok(FitDevice { rt, stream, memory: DeviceMemory::default(), arena, watch: None, calls })
    }

    pub(super) fn zeros<T: DeviceRepr + ValidAsZeroBits>(&mut self, len: usize) -> Result<CudaSlice<T>> {
        self.memory.zeros(&self.stream, len)
    }

    /// A new device buffer holding `data` (a synchronous copy: for set-up, not per level).
    pub(super) fn upload<T: DeviceRepr>(&mut self, data: &[T]) -> Result<CudaSlice<T>> {
        self.memory.upload(&self.stream, data)
    }

    pub(super) fn scratch<T: DeviceRepr + ValidAsZeroBits>(&mut self, len: usize) -> Result<Scratch<T>> {
        Scratch::new(&mut self.memory, &self.stream, len)
    }

    pub(super) fn reserve<T: DeviceRepr + ValidAsZeroBits>(&mut self, s: &mut Scratch<T>, len: usize) -> Result<()> {
        s.reserve(&mut self.memory, &self.stream, len)
    }

    /// Queues a copy of `data` into the front of `s` (through the pinned arena: asynchronous).
    pub(super) fn fill<T: DeviceRepr + ValidAsZeroBits>(&mut self, s: &mut Scratch<T>, data: &[T]) -> Result<()> {
        // An upload the arena has no room for waits for the stream: with exchanges queued,
        // through the collective (see `watch`).
        if self.watch.is_some() && !self.arena.has_room(std::mem::size_of_val(data)) {
            self.drain()?;
            self.arena.drained();
        }
        let started = start(&self.calls);
        let r = s.upload(&mut self.memory, &mut self.arena, &self.stream, data);
        if let (Some(c), Some(t)) = (&mut self.calls, started) {
            c.uploads = c.uploads.plus(t);
        }
        r
    }

    /// Queues one copy of several arrays of plain data into `s`, each part from a multiple of
    /// 16 bytes; returns each part's byte offset. A level's small inputs go up this way: each
    /// upload is a driver call and a copy the device waits for.
    pub(super) fn fill_parts<const N: usize>(&mut self, s: &mut Scratch<u8>, parts: [&[u8]; N]) -> Result<[usize; N]> {
        let mut offsets = [0; N];
        let mut at = 0;
        for (o, part) in offsets.iter_mut().zip(&parts) {
            *o = at;
            at = (at + part.len()).next_multiple_of(16);
        }
        let mut bytes = vec![0u8; at];
        for (&o, part) in offsets.iter().zip(&parts) {
            bytes[o..o + part.len()].copy_from_slice(part);
        }
        self.fill(s, &bytes)?;
        Ok(offsets)
    }

    /// `src` on the host. The copy drains the stream, and so frees the upload arena.
    pub(super) fn download<T: DeviceRepr>(&mut self, src: CudaView<'_, T>) -> Result<Vec<T>> {
        let started = start(&self.calls);
        self.drain()?;
        let v = self.stream.clone_dtoh(&src).map_err(device_error)?;
        self.arena.drained();
        if let (Some(c), Some(t)) = (&mut self.calls, started) {
            c.downloads = c.downloads.plus(t);
        }
        Ok(v)
    }

    /// `a` and `b` on the host after one wait: both are copied into the pinned arena's free end
    /// and the stream is drained once. Two plain read-backs cost two waits (each a round trip
    /// with the GPU drained); a level's split search and its partition's counts are read this way.
    pub(super) fn download_pair<A: DeviceRepr, B: DeviceRepr>(
        &mut self,
        a: CudaView<'_, A>,
        b: CudaView<'_, B>,
    ) -> Result<(Vec<A>, Vec<B>)> {
        let (a_bytes, b_bytes) = (std::mem::size_of::<A>() * a.len(), std::mem::size_of::<B>() * b.len());
        let Some((a_at, b_at)) = self.arena.room_for_reads(a_bytes, b_bytes) else {
            return Ok((self.download(a)?, self.download(b)?));
        };
        let started = start(&self.calls);
        let stream = self.stream.clone();
        for (at, bytes, src) in [(a_at, a_bytes, a.device_ptr(&stream).0), (b_at, b_bytes, b.device_ptr(&stream).0)] {
            // SAFETY: [at, at + bytes) lies in the pinned buffer past every queued upload's
            // source (`room_for_reads`), and the source holds `bytes` bytes on this stream.
            unsafe {
                let dst = std::slice::from_raw_parts_mut(self.arena.base.add(at), bytes);
                cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream())
            }
            .map_err(device_error)?;
        }
        self.drain()?;
        stream.synchronize().map_err(device_error)?;
        // SAFETY: the copies are done; A and B are plain data (DeviceRepr), their bytes at
        // offsets aligned to 16 as `room_for_reads` gives them.
        let (va, vb) = unsafe { (self.arena.read_out::<A>(a_at, a.len()), self.arena.read_out::<B>(b_at, b.len())) };
        self.arena.drained();
        if let (Some(c), Some(t)) = (&mut self.calls, started) {
            c.downloads = c.downloads.plus(t);
        }
        Ok((va, vb))
    }

    /// Waits for the stream through the fit's collective when one has exchanges queued on it
    /// (see `watch`); a plain fit's copies wait on their own.
    pub(super) fn drain(&self) -> Result<()> {
        match self.watch {
            Some(w) => w.wait("reading results back from the GPU"),
            None => Ok(()),
        }
    }

    /// A grid of `threads`-thread blocks covering `work` items.
    pub(super) fn grid(&self, work: u64, threads: u32) -> LaunchConfig {
        grid_for(self.rt.sm_count, work, threads)
    }

    /// Hands out device pointers for a launch on the fit's stream (see [`Pins`]).
    pub(super) fn pins(&self) -> Pins<'_> {
        Pins::new(&self.stream)
    }

    /// Queues `kernel` with `args` on the fit's stream ([`launch::launch`]).
    ///
    /// # Safety
    /// As [`launch::launch`].
    pub(super) unsafe fn launch<A: KernelArgs>(
        &self,
        kernel: &Kernel<A::Key>,
        args: &A,
        cfg: LaunchConfig,
    ) -> Result<()> {
        let Some(c) = &self.calls else { return launch::launch(&self.stream, kernel, args, cfg) };
        let started = Instant::now();
        let r = launch::launch(&self.stream, kernel, args, cfg);
        c.launches.set(c.launches.get().plus(started));
        r
    }
}

impl Drop for FitDevice<'_> {
    /// Gives the arena's pinned buffer back to the runtime for the next fit, once no copy out
    /// of it is queued (after a device error it is simply freed). With exchanges queued, the
    /// wait goes through the collective: a plain one would hang on a dead peer's all-reduce.
    fn drop(&mut self) {
        if let Some(host) = self.arena.host.take() {
            if self.drain().is_ok() && self.stream.synchronize().is_ok() {
                self.rt.give_back_pinned(host);
            }
        }
    }
}

/// Small uploads (a level's tasks, rules, masks) go through one pinned host buffer, so they
/// stay asynchronous: cudarc copies from pageable memory only after draining the stream. The
/// buffer is reused from its start after each download, which drains the stream anyway. It is
/// lent by the runtime and given back when the fit ends (`FitDevice`'s drop).
pub(super) struct UploadArena {
    /// None only while the fit's device is being dropped.
    host: Option<PinnedHostSlice<u8>>,
    base: *mut u8,
    used: usize,
}

impl UploadArena {
    const BYTES: usize = 4 << 20;

    fn new(rt: &Runtime, stream: &Arc<CudaStream>) -> Result<Self> {
        let mut host = match rt.lend_pinned() {
            Some(host) => host,
            // SAFETY: the buffer is written only at offsets no queued copy reads (see `upload`).
            None => unsafe { stream.context().alloc_pinned::<u8>(Self::BYTES) }.map_err(device_error)?,
        };
        let base = host.as_mut_ptr().map_err(device_error)?;
        Ok(UploadArena { host: Some(host), base, used: 0 })
    }

    /// Queues a copy of `data` into the front of `dst`.
    pub(super) fn upload<T: DeviceRepr>(
        &mut self,
        stream: &Arc<CudaStream>,
        data: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        if bytes == 0 {
            return Ok(());
        }
        assert!(dst.len() >= data.len(), "upload larger than its destination");
        if bytes > Self::BYTES {
            return stream.memcpy_htod(data, &mut dst.slice_mut(..data.len())).map_err(device_error);
        }
        let mut start = self.used.next_multiple_of(16);
        if start + bytes > Self::BYTES {
            // Every queued copy out of the buffer must finish before it is overwritten.
            stream.synchronize().map_err(device_error)?;
            start = 0;
        }
        // SAFETY: [start, start + bytes) lies in the pinned buffer and no queued copy reads it
        // (copies queued since the last drain use earlier offsets); T is plain data.
        let staged = unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr() as *const u8, self.base.add(start), bytes);
            std::slice::from_raw_parts(self.base.add(start) as *const T, data.len())
        };
        let (dst_ptr, _record) = dst.device_ptr_mut(stream);
        // SAFETY: the destination holds at least data.len() elements; the source is pinned and
        // stays untouched until the stream passes this copy.
        unsafe { cudarc::driver::result::memcpy_htod_async(dst_ptr, staged, stream.cu_stream()) }
            .map_err(device_error)?;
        self.used = start + bytes;
        Ok(())
    }

    /// Whether `bytes` can be queued without waiting for the stream.
    fn has_room(&self, bytes: usize) -> bool {
        bytes <= Self::BYTES && self.used.next_multiple_of(16) + bytes <= Self::BYTES
    }

    /// Offsets for two read-backs of `a` and `b` bytes past the queued uploads' sources, each
    /// aligned to 16; None when the buffer has no room for them.
    fn room_for_reads(&self, a: usize, b: usize) -> Option<(usize, usize)> {
        let a_at = self.used.next_multiple_of(16);
        let b_at = (a_at + a).next_multiple_of(16);
        (b_at + b <= Self::BYTES).then_some((a_at, b_at))
    }

    /// `len` values of `T` read back at `at`.
    ///
    /// # Safety
    /// The copy into `[at, at + len * size_of::<T>())` has finished, `at` is aligned for `T`,
    /// and `T` is plain data.
    unsafe fn read_out<T>(&self, at: usize, len: usize) -> Vec<T> {
        let mut v = Vec::with_capacity(len);
        std::ptr::copy_nonoverlapping(self.base.add(at) as *const T, v.as_mut_ptr(), len);
        v.set_len(len);
        v
    }

    /// After the stream has been drained: the whole buffer is free again.
    pub(super) fn drained(&mut self) {
        self.used = 0;
    }
}

/// The bytes of plain data (a `#[repr(C)]` struct of integers, as the kernels' inputs are).
pub(super) fn bytes_of<T: DeviceRepr>(values: &[T]) -> &[u8] {
    // SAFETY: DeviceRepr values are plain data, readable as bytes for their whole size.
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) }
}

/// A device buffer that grows to the largest size asked of it.
pub(super) struct Scratch<T: DeviceRepr + ValidAsZeroBits> {
    pub(super) buf: CudaSlice<T>,
}

impl<T: DeviceRepr + ValidAsZeroBits> Scratch<T> {
    pub(super) fn new(memory: &mut DeviceMemory, stream: &Arc<CudaStream>, len: usize) -> Result<Self> {
        Ok(Scratch { buf: memory.zeros(stream, len)? })
    }

    pub(super) fn reserve(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>, len: usize) -> Result<()> {
        if len > self.buf.len() {
            memory.allocated -= self.buf.len() * std::mem::size_of::<T>();
            self.buf = memory.zeros(stream, len.max(self.buf.len() * 2))?;
        }
        Ok(())
    }

    pub(super) fn upload(
        &mut self,
        memory: &mut DeviceMemory,
        arena: &mut UploadArena,
        stream: &Arc<CudaStream>,
        data: &[T],
    ) -> Result<()> {
        self.reserve(memory, stream, data.len())?;
        arena.upload(stream, data, &mut self.buf)
    }
}

/// Histograms of the nodes that may still split, one slot each, in one growable buffer.
pub(super) struct HistPool {
    pub(super) buf: CudaSlice<GradSum>,
    pub(super) capacity: u32,
    pub(super) free: Vec<u32>,
    pub(super) total_slots: usize,
    /// The run of slots a distributed fit's level exchange uses: `(first, len)`.
    pub(super) exchange: Option<(u32, u32)>,
}

impl HistPool {
    /// Room for `slots` histograms at once, allocated up front.
    pub(super) fn reserve(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>, slots: u32) -> Result<()> {
        if slots > self.capacity {
            memory.allocated -= self.buf.len() * std::mem::size_of::<GradSum>();
            self.buf = memory.zeros::<GradSum>(stream, slots as usize * self.total_slots)?;
            self.free = (0..slots).rev().collect();
            self.capacity = slots;
        }
        Ok(())
    }

    pub(super) fn alloc(&mut self, memory: &mut DeviceMemory, stream: &Arc<CudaStream>) -> Result<u32> {
        if let Some(s) = self.free.pop() {
            return Ok(s);
        }
        // Double the pool, keeping the histograms in use.
        let new_capacity = (self.capacity * 2).max(8);
        let mut grown = memory.zeros::<GradSum>(stream, new_capacity as usize * self.total_slots)?;
        if self.capacity > 0 {
            let used = self.capacity as usize * self.total_slots;
            stream.memcpy_dtod(&self.buf.slice(..used), &mut grown.slice_mut(..used)).map_err(device_error)?;
        }
        memory.allocated -= self.buf.len() * std::mem::size_of::<GradSum>();
        self.buf = grown;
        self.free.extend((self.capacity..new_capacity).rev());
        self.capacity = new_capacity;
        Ok(self.free.pop().unwrap())
    }

    pub(super) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// The first of `count` consecutive slots outside the free list, where a distributed
    /// fit sums a level's histograms over the workers (one exchange a level). They hold the
    /// sums until the next exchange. The run is reused level after level, and grows (at the
    /// pool's end, doubling) only when a level has more nodes than it holds.
    pub(super) fn exchange_run(
        &mut self,
        memory: &mut DeviceMemory,
        stream: &Arc<CudaStream>,
        count: u32,
    ) -> Result<u32> {
        if let Some((first, len)) = self.exchange {
            if len >= count {
                return Ok(first);
            }
        }
        let old = self.exchange.map_or(0, |(_, len)| len);
        let len = count.max(old * 2).max(8);
        let first = self.capacity;
        let mut grown = memory.zeros::<GradSum>(stream, (first + len) as usize * self.total_slots)?;
        if self.capacity > 0 {
            let used = self.capacity as usize * self.total_slots;
            stream.memcpy_dtod(&self.buf.slice(..used), &mut grown.slice_mut(..used)).map_err(device_error)?;
        }
        memory.allocated -= self.buf.len() * std::mem::size_of::<GradSum>();
        self.buf = grown;
        self.capacity = first + len;
        // The old run's slots become ordinary ones.
        if let Some((old_first, old_len)) = self.exchange.replace((first, len)) {
            self.free.extend(old_first..old_first + old_len);
        }
        Ok(first)
    }

    /// The histogram in `slot`.
    pub(super) fn slot(&self, slot: u32) -> cudarc::driver::CudaView<'_, GradSum> {
        let start = slot as usize * self.total_slots;
        self.buf.slice(start..start + self.total_slots)
    }

    /// `count` histograms from slot `first` on.
    pub(super) fn run(&self, first: u32, count: u32) -> cudarc::driver::CudaView<'_, GradSum> {
        let start = first as usize * self.total_slots;
        self.buf.slice(start..start + count as usize * self.total_slots)
    }

    /// `count` histograms from slot `first` on, as one mutable view.
    pub(super) fn run_mut(&mut self, first: u32, count: u32) -> cudarc::driver::CudaViewMut<'_, GradSum> {
        let start = first as usize * self.total_slots;
        self.buf.slice_mut(start..start + count as usize * self.total_slots)
    }

    /// Writes `hist` (one histogram) into `slot`.
    pub(super) fn write(&mut self, stream: &Arc<CudaStream>, slot: u32, hist: &[GradSum]) -> Result<()> {
        let start = slot as usize * self.total_slots;
        stream.memcpy_htod(hist, &mut self.buf.slice_mut(start..start + self.total_slots)).map_err(device_error)
    }
}
