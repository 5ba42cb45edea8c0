//! Every kernel launch goes through [`launch`]: each kernel takes one `#[repr(C)]` argument
//! struct by value (defined beside its launch wrapper, mirrored in `kernels/*.cu`, and laid
//! out alike on both sides: the layout probe, `layout.rs`, checks its size and every field's
//! offset). The driver does not type-check kernel arguments, so the pairing of a kernel with its
//! struct is made a Rust type: a [`Kernel<A>`] of the kernel table launches only with an `A`.
//!
//! Device pointers travel in the structs as [`DevPtr`] (read) and [`DevPtrMut`] (written):
//! the buffer's address, borrowed from the buffer for as long as the struct lives, so a buffer
//! cannot be freed or written elsewhere while a launch's arguments point at it. [`Pins`] hands
//! them out and keeps cudarc's synchronisation guards alive until after the launch (they do
//! nothing while event tracking is off, as `Runtime::start` sets it, and record the launch on
//! the buffers' events were it ever turned on).

use std::marker::PhantomData;
use std::ops::Deref;

use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig, PushKernelArg, SyncOnDrop,
};

use super::device_error;
use crate::error::Result;

/// A device buffer the kernel reads: `const T*` on the CUDA side.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct DevPtr<'a, T> {
    ptr: CUdeviceptr,
    _buffer: PhantomData<&'a T>,
}

impl<'a, T> DevPtr<'a, T> {
    /// No buffer: a null pointer, for the kernels' optional inputs (weights).
    pub const NULL: Self = DevPtr { ptr: 0, _buffer: PhantomData };

    /// The same buffer read as `U`s (a byte scratch holding wider values).
    pub fn cast<U>(self) -> DevPtr<'a, U> {
        DevPtr { ptr: self.ptr, _buffer: PhantomData }
    }

    /// The `U`s that start `bytes` bytes into the buffer (one part of several uploaded together).
    ///
    /// # Safety
    /// The part must lie within the buffer, aligned for `U`.
    pub unsafe fn part<U>(self, bytes: usize) -> DevPtr<'a, U> {
        DevPtr { ptr: self.ptr + bytes as CUdeviceptr, _buffer: PhantomData }
    }

    /// Memory the caller owns, by address (another library's array: `predict/device_rows.rs`).
    ///
    /// # Safety
    /// `ptr` must stay valid device memory of this context for as long as the launches that
    /// read it run, for every element they read.
    pub unsafe fn foreign(ptr: CUdeviceptr) -> Self {
        DevPtr { ptr, _buffer: PhantomData }
    }
}

/// A device buffer the kernel writes (and may read): `T*` on the CUDA side.
#[repr(transparent)]
pub struct DevPtrMut<'a, T> {
    ptr: CUdeviceptr,
    _buffer: PhantomData<&'a mut T>,
}

impl<'a, T> DevPtrMut<'a, T> {
    /// No buffer: a null pointer, for the kernels' optional outputs.
    pub const NULL: Self = DevPtrMut { ptr: 0, _buffer: PhantomData };

    /// The same buffer written as `U`s (a byte scratch holding wider values).
    pub fn cast<U>(self) -> DevPtrMut<'a, U> {
        DevPtrMut { ptr: self.ptr, _buffer: PhantomData }
    }

    /// Whether this is [`DevPtrMut::NULL`].
    pub fn is_null(&self) -> bool {
        self.ptr == 0
    }

    /// The buffer from its element `n` on (a launch writing a part of a wider buffer).
    ///
    /// # Safety
    /// Element `n` must lie within the buffer, and the launch must write only its part.
    pub unsafe fn skip(self, n: usize) -> Self {
        DevPtrMut { ptr: self.ptr + (n * std::mem::size_of::<T>()) as CUdeviceptr, _buffer: PhantomData }
    }

    /// Memory the caller owns, by address, written by the kernel ([`DevPtr::foreign`]).
    ///
    /// # Safety
    /// As [`DevPtr::foreign`], and no other work may use the memory while the launches run.
    pub unsafe fn foreign(ptr: CUdeviceptr) -> Self {
        DevPtrMut { ptr, _buffer: PhantomData }
    }
}

/// Hands out the device pointers of one launch's arguments, on its stream, and holds cudarc's
/// guards for them; drop it after the launch (declare it before the arguments).
pub struct Pins<'a> {
    stream: &'a CudaStream,
    guards: Vec<SyncOnDrop<'a>>,
}

impl<'a> Pins<'a> {
    pub fn new(stream: &'a CudaStream) -> Self {
        Pins { stream, guards: Vec::new() }
    }

    fn keep(&mut self, guard: SyncOnDrop<'a>) {
        // A guard with nothing to record or wait for (event tracking is off) needs no keeping:
        // no allocation per launch.
        if !matches!(guard, SyncOnDrop::Record(None) | SyncOnDrop::Sync(None)) {
            self.guards.push(guard);
        }
    }

    /// `buffer`, read by the kernel.
    pub fn read<T, B: DevicePtr<T>>(&mut self, buffer: &'a B) -> DevPtr<'a, T> {
        let (ptr, guard) = buffer.device_ptr(self.stream);
        self.keep(guard);
        DevPtr { ptr, _buffer: PhantomData }
    }

    /// `buffer` if any, else a null pointer.
    pub fn read_opt<T, B: DevicePtr<T>>(&mut self, buffer: Option<&'a B>) -> DevPtr<'a, T> {
        buffer.map_or(DevPtr::NULL, |b| self.read(b))
    }

    /// `buffer`, written by the kernel.
    pub fn write<T, B: DevicePtrMut<T>>(&mut self, buffer: &'a mut B) -> DevPtrMut<'a, T> {
        let (ptr, guard) = buffer.device_ptr_mut(self.stream);
        self.keep(guard);
        DevPtrMut { ptr, _buffer: PhantomData }
    }
}

/// A kernel's argument struct.
///
/// # Safety
/// `Self` is `#[repr(C)]`, laid out as the CUDA struct of the same name (the layout probe
/// checks it), and holds only integers, floats, plain `#[repr(C)]` structs and device pointers.
pub unsafe trait KernelArgs: DeviceRepr {
    /// The struct with its borrows erased, naming it in the kernel table.
    type Key: 'static;
}

/// Implements [`KernelArgs`] and `DeviceRepr` for argument structs with one lifetime
/// (their pointers'), each optionally generic over one type (a bin or entry width).
macro_rules! kernel_args {
    ($($name:ident $(<$g:ident>)?),* $(,)?) => {$(
        // SAFETY: a #[repr(C)] struct of plain values and device pointers (u64), laid out as its
        // CUDA twin (checked by the layout probe in layout.rs).
        unsafe impl<$($g: 'static)?> cudarc::driver::DeviceRepr for $name<'_ $(, $g)?> {}
        // SAFETY: as above.
        unsafe impl<$($g: 'static)?> $crate::backend::cuda::launch::KernelArgs for $name<'_ $(, $g)?> {
            type Key = $name<'static $(, $g)?>;
        }
    )*};
}
pub(crate) use kernel_args;

/// A loaded kernel whose argument struct is `A` (erased of its borrows: `A::Key`).
pub struct Kernel<A> {
    function: CudaFunction,
    _args: PhantomData<fn(A)>,
}

impl<A> Kernel<A> {
    pub(super) fn new(function: CudaFunction) -> Self {
        Kernel { function, _args: PhantomData }
    }
}

impl<A> Deref for Kernel<A> {
    type Target = CudaFunction;
    fn deref(&self) -> &CudaFunction {
        &self.function
    }
}

/// Queues `kernel` on `stream` with `args`: the one place a kernel is launched.
///
/// # Safety
/// `args` must be what the kernel may use in `cfg`'s grid: every pointer valid for the
/// elements the kernel reads or writes at the counts passed with it, and the dynamic shared
/// memory as large as the kernel expects. Keep the [`Pins`] that made its pointers alive
/// until this returns.
pub unsafe fn launch<A: KernelArgs>(
    stream: &CudaStream,
    kernel: &Kernel<A::Key>,
    args: &A,
    cfg: LaunchConfig,
) -> Result<()> {
    stream.launch_builder(&kernel.function).arg(args).launch(cfg).map(drop).map_err(device_error)
}

/// A launch shape: `blocks` (x, y) of `threads` threads with `shared` bytes of dynamic shared memory.
pub(super) fn cfg(blocks: (u32, u32), threads: u32, shared: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.0, blocks.1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: shared }
}

/// A grid-stride launch for `work` items on a GPU of `sm_count` SMs: enough blocks to fill it,
/// no more.
pub(super) fn grid_for(sm_count: u32, work: u64, threads: u32) -> LaunchConfig {
    let blocks = work.div_ceil(threads as u64).clamp(1, sm_count as u64 * 8) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}
