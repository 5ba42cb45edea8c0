//! NCCL, opened by path: the collective of GPUs, in one process or several. cudarc's NCCL
//! loader looks only for `libnccl.so`, and the `nvidia-nccl-cu13` wheel ships only
//! `libnccl.so.2`, so this is a small binding of its own over the dozen calls the fit uses,
//! loaded (and probed: a missing NCCL is an error, never a panic) on first use.
//!
//! Communicators are created non-blocking, and every operation waits for its stream with a
//! deadline: a peer that died or hangs is an error naming the operation, and the
//! communicator is aborted, never left waiting.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arrow_buffer::ToByteSlice;
use cudarc::driver::sys::{cuStreamQuery, CUresult, CUstream};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};

use super::device_error;
use super::runtime::{Runtime, Turn};
use crate::collective::{Collective, DeviceOp, DeviceReduction, DeviceSums};
use crate::error::{Error, Result};

type NcclResult = c_int;
type RawComm = *mut c_void;

const SUCCESS: NcclResult = 0;
const IN_PROGRESS: NcclResult = 7;
const UINT8: c_int = 1;
const UINT32: c_int = 3;
const INT64: c_int = 4;
const SUM: c_int = 0;
const MAX: c_int = 2;

/// `ncclUniqueId`: what every rank of one communicator is started from.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    internal: [c_char; 128],
}

impl UniqueId {
    pub fn to_bytes(&self) -> Vec<u8> {
        self.internal.iter().map(|&c| c as u8).collect()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let internal: [u8; 128] =
            bytes.try_into().map_err(|_| Error::Collective(format!("an NCCL id is 128 bytes, not {}", bytes.len())))?;
        Ok(UniqueId { internal: internal.map(|b| b as c_char) })
    }
}

/// `ncclConfig_t` as NCCL 2.17 laid it out. NCCL reads a config by its recorded size and
/// version, so this older layout is accepted by every later release.
#[repr(C)]
struct Config {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
}

const UNDEF: c_int = c_int::MIN;

impl Config {
    fn non_blocking() -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            magic: 0xcafe_beef,
            version: 21700,
            blocking: 0,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
        }
    }
}

/// The calls the fit makes, from one loaded library.
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    init_rank_config: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int, *mut Config) -> NcclResult,
    async_error: unsafe extern "C" fn(RawComm, *mut NcclResult) -> NcclResult,
    abort: unsafe extern "C" fn(RawComm) -> NcclResult,
    finalize: unsafe extern "C" fn(RawComm) -> NcclResult,
    destroy: unsafe extern "C" fn(RawComm) -> NcclResult,
    all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, CUstream) -> NcclResult,
    all_gather: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, CUstream) -> NcclResult,
    broadcast: unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, RawComm, CUstream) -> NcclResult,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    last_error: unsafe extern "C" fn(RawComm) -> *const c_char,
    /// Keeps the functions above loaded.
    _library: libloading::Library,
}

static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api> {
    API.get_or_init(Api::load).as_ref().map_err(|why| Error::Device(why.clone()))
}

/// Whether NCCL can be loaded here, and its version (e.g. 22805), or why not.
pub fn probe() -> std::result::Result<i32, String> {
    let api = API.get_or_init(Api::load).as_ref().map_err(Clone::clone)?;
    let mut version = 0;
    // SAFETY: writes one int.
    match unsafe { (api.get_version)(&mut version) } {
        SUCCESS => Ok(version),
        code => Err(format!("NCCL could not report its version (error {code})")),
    }
}

/// Directories that may hold `libnccl.so.2`: `POLARS_GBT_NCCL_DIRS` (the Python package sets it
/// to its `nvidia-nccl-cu13` wheel), `NCCL_HOME`, `CUDA_HOME`; then the loader's own path.
fn library_candidates() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("POLARS_GBT_NCCL_DIRS") {
        dirs.extend(std::env::split_paths(&v));
    }
    for var in ["NCCL_HOME", "CUDA_HOME"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(&v).join("lib"));
            dirs.push(PathBuf::from(v).join("lib64"));
        }
    }
    let mut paths: Vec<PathBuf> = dirs.into_iter().map(|d| d.join("libnccl.so.2")).filter(|p| p.exists()).collect();
    paths.push(PathBuf::from("libnccl.so.2"));
    paths
}

impl Api {
    fn load() -> std::result::Result<Api, String> {
        let mut tried = Vec::new();
        for path in library_candidates() {
            // SAFETY: NVIDIA's NCCL library; loading it runs only its own initialisers.
            match unsafe { libloading::Library::new(&path) } {
                Ok(lib) => return Self::bind(lib).map_err(|e| format!("{} is not a usable NCCL: {e}", path.display())),
                Err(e) => tried.push(format!("{}: {e}", path.display())),
            }
        }
        Err(format!(
            "NCCL (libnccl.so.2) could not be loaded, and several GPUs need it: install it with \
             `pip install \"polars-gbt[nccl]\"` (the nvidia-nccl-cu13 wheel), or put its lib directory in POLARS_GBT_NCCL_DIRS ({})",
            tried.join("; ")
        ))
    }

    fn bind(lib: libloading::Library) -> std::result::Result<Api, libloading::Error> {
        // SAFETY: each symbol is NCCL's, with the C signature of nccl.h that its field declares.
        unsafe {
            Ok(Api {
                get_version: *lib.get(b"ncclGetVersion\0")?,
                get_unique_id: *lib.get(b"ncclGetUniqueId\0")?,
                init_rank_config: *lib.get(b"ncclCommInitRankConfig\0")?,
                async_error: *lib.get(b"ncclCommGetAsyncError\0")?,
                abort: *lib.get(b"ncclCommAbort\0")?,
                finalize: *lib.get(b"ncclCommFinalize\0")?,
                destroy: *lib.get(b"ncclCommDestroy\0")?,
                all_reduce: *lib.get(b"ncclAllReduce\0")?,
                all_gather: *lib.get(b"ncclAllGather\0")?,
                broadcast: *lib.get(b"ncclBroadcast\0")?,
                group_start: *lib.get(b"ncclGroupStart\0")?,
                group_end: *lib.get(b"ncclGroupEnd\0")?,
                error_string: *lib.get(b"ncclGetErrorString\0")?,
                last_error: *lib.get(b"ncclGetLastError\0")?,
                _library: lib,
            })
        }
    }

    fn describe(&self, code: NcclResult, comm: RawComm) -> String {
        // SAFETY: NCCL returns static, NUL-terminated strings (or null).
        let text =
            |p: *const c_char| (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        let what = unsafe { text((self.error_string)(code)) }.unwrap_or_else(|| format!("error {code}"));
        match unsafe { text((self.last_error)(comm)) }.filter(|s| !s.is_empty()) {
            Some(detail) => format!("{what} ({detail})"),
            None => what,
        }
    }
}

/// A new id for a communicator: made once, by one rank, and given to all.
pub fn unique_id() -> Result<UniqueId> {
    let api = api()?;
    let mut id = UniqueId { internal: [0; 128] };
    // SAFETY: writes one `ncclUniqueId`.
    match unsafe { (api.get_unique_id)(&mut id) } {
        SUCCESS => Ok(id),
        code => {
            Err(Error::Collective(format!("NCCL could not make an id: {}", api.describe(code, std::ptr::null_mut()))))
        }
    }
}

/// One rank of an NCCL communicator, on one GPU, whose operations run on that GPU's stream
/// (the stream of its [`Runtime`], which the fit's kernels use too, so sums follow the
/// kernels that produced them).
pub struct NcclComm {
    api: &'static Api,
    comm: RawComm,
    rank: usize,
    world: usize,
    ordinal: usize,
    stream: Arc<CudaStream>,
    timeout: Duration,
    /// Set by any rank of this process whose fit failed: the others stop waiting for it.
    peer_failed: Arc<AtomicBool>,
    /// Once an operation fails the communicator is aborted, and every later one fails.
    broken: AtomicBool,
    /// A device buffer for the host-side operations, grown as needed.
    staging: Mutex<Option<CudaSlice<u8>>>,
    /// A worker's communicator (`join_workers`) holds its GPU whole while it lives: its
    /// exchanges, queued on the runtime's stream, must not interleave with another fit's.
    held: Option<Turn>,
}

// SAFETY: the raw communicator is used by one thread at a time (the worker's), and NCCL's
// communicators may move between threads; the rest is Send + Sync.
unsafe impl Send for NcclComm {}
unsafe impl Sync for NcclComm {}

impl NcclComm {
    /// Joins rank `rank` of a `world`-rank communicator started from `id`, on `rt`'s GPU.
    /// Every rank must call this at about the same time; `timeout` bounds the wait for the
    /// others here and in every later operation. `peer_failed`, shared by the ranks of one
    /// process, ends every rank's wait when one of them fails.
    pub fn join(
        rt: &Runtime,
        id: &UniqueId,
        rank: usize,
        world: usize,
        timeout: Duration,
        peer_failed: Arc<AtomicBool>,
    ) -> Result<NcclComm> {
        let api = api()?;
        // NCCL picks its GPU from the calling thread's current context.
        rt.stream.context().bind_to_thread().map_err(device_error)?;
        let mut comm: RawComm = std::ptr::null_mut();
        let mut config = Config::non_blocking();
        // SAFETY: `comm` and `config` outlive the call; the id is passed by value.
        let code = unsafe { (api.init_rank_config)(&mut comm, world as c_int, *id, rank as c_int, &mut config) };
        let this = NcclComm {
            api,
            comm,
            rank,
            world,
            ordinal: rt.stream.context().ordinal(),
            stream: rt.stream.clone(),
            timeout,
            peer_failed,
            broken: AtomicBool::new(false),
            staging: Mutex::new(None),
            held: None,
        };
        if code != SUCCESS && code != IN_PROGRESS {
            this.broken.store(true, Ordering::SeqCst);
            return Err(Error::Collective(format!(
                "NCCL could not start rank {rank} of {world} on GPU {}: {}",
                this.ordinal,
                api.describe(code, comm)
            )));
        }
        this.settle("starting the communicator", Instant::now() + timeout)?;
        Ok(this)
    }

    /// Holds `turn` (its GPU, whole) until the communicator is dropped or [`release`]d.
    ///
    /// [`release`]: NcclComm::release
    pub fn holding(mut self, turn: Turn) -> NcclComm {
        self.held = Some(turn);
        self
    }

    /// Gives back the GPU this communicator held (it is kept between fits, idle).
    pub fn release(&mut self) {
        self.held = None;
    }

    /// The deadline of every later operation.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Aborts the communicator without the clean end's wait for its peers (which may be gone).
    pub fn abandon(self) {
        let _ = self.fail(String::new());
    }

    /// Whether the communicator can be used again (no operation of it failed and aborted it).
    pub fn is_usable(&self) -> bool {
        !self.broken.load(Ordering::SeqCst) && !self.comm.is_null()
    }

    /// Waits until the communicator has finished its last call (non-blocking communicators
    /// return `ncclInProgress` while they work).
    fn settle(&self, what: &str, deadline: Instant) -> Result<()> {
        let mut spins = 0u32;
        loop {
            let mut state = SUCCESS;
            // SAFETY: reads the communicator's state.
            let code = unsafe { (self.api.async_error)(self.comm, &mut state) };
            let state = if code == SUCCESS { state } else { code };
            match state {
                SUCCESS => return Ok(()),
                IN_PROGRESS => self.pause(what, deadline, &mut spins)?,
                failed => {
                    return Err(self.fail(format!("NCCL failed while {what}: {}", self.api.describe(failed, self.comm))))
                }
            }
        }
    }

    /// Waits for the stream (the queued operation) with the deadline, watching the
    /// communicator for a peer's failure.
    fn wait_stream(&self, what: &str, deadline: Instant) -> Result<()> {
        let mut spins = 0u32;
        loop {
            // SAFETY: queries a live stream.
            match unsafe { cuStreamQuery(self.stream.cu_stream()) } {
                CUresult::CUDA_SUCCESS => return Ok(()),
                CUresult::CUDA_ERROR_NOT_READY => {}
                e => return Err(self.fail(format!("the GPU failed while {what}: {e:?}"))),
            }
            let mut state = SUCCESS;
            // SAFETY: reads the communicator's state.
            let code = unsafe { (self.api.async_error)(self.comm, &mut state) };
            let state = if code == SUCCESS { state } else { code };
            if state != SUCCESS && state != IN_PROGRESS {
                return Err(self.fail(format!("NCCL failed while {what}: {}", self.api.describe(state, self.comm))));
            }
            self.pause(what, deadline, &mut spins)?;
        }
    }

    /// One step of a wait; fails at the deadline or when a peer of this process has failed.
    fn pause(&self, what: &str, deadline: Instant, spins: &mut u32) -> Result<()> {
        if self.peer_failed.load(Ordering::SeqCst) {
            return Err(self.fail(format!("stopped while {what}: the fit on another GPU failed")));
        }
        if Instant::now() > deadline {
            return Err(self.fail(format!(
                "rank {} of {} (GPU {}) timed out while {what}: the other GPUs or workers did not take part \
                 within the timeout of {:.0} s",
                self.rank,
                self.world,
                self.ordinal,
                self.timeout.as_secs_f64()
            )));
        }
        // Spin, then yield (a level's exchange is tens of microseconds, and a sleep's
        // wake-up costs more), and sleep only through long waits (another GPU binning).
        *spins += 1;
        if *spins < 2_000 {
            std::hint::spin_loop();
        } else if *spins < 200_000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Aborts the communicator (its peers then fail too) and makes `why` the error.
    fn fail(&self, why: String) -> Error {
        if !self.broken.swap(true, Ordering::SeqCst) {
            // SAFETY: aborting a communicator that is not used again.
            unsafe { (self.api.abort)(self.comm) };
        }
        Error::Collective(why)
    }

    fn check(&self, what: &str, code: NcclResult) -> Result<()> {
        match code {
            SUCCESS | IN_PROGRESS => Ok(()),
            code => Err(self.fail(format!("NCCL failed while {what}: {}", self.api.describe(code, self.comm)))),
        }
    }

    fn usable(&self, what: &str) -> Result<()> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(Error::Collective(format!("cannot go on {what}: the GPUs' communicator was aborted")));
        }
        self.stream.context().bind_to_thread().map_err(device_error)
    }

    /// Queues `ops` (NCCL calls) on the stream as one group, without waiting for them.
    fn queue_group(&self, what: &str, ops: impl FnOnce() -> Result<()>) -> Result<()> {
        self.usable(what)?;
        // SAFETY: group calls take no arguments; a group is closed on every path.
        self.check(what, unsafe { (self.api.group_start)() })?;
        let queued = ops();
        self.check(what, unsafe { (self.api.group_end)() })?;
        queued?;
        // A non-blocking communicator may still be queuing the group: it is on the stream
        // only once the communicator settles.
        self.settle(what, Instant::now() + self.timeout)
    }

    /// Runs `ops` (queued NCCL calls) as one group, then waits for them.
    fn grouped(&self, what: &str, ops: impl FnOnce() -> Result<()>) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        self.queue_group(what, ops)?;
        self.wait_stream(what, deadline)
    }

    /// The staging buffer, at least `bytes` long.
    fn with_staging<T>(&self, bytes: usize, f: impl FnOnce(&mut CudaSlice<u8>) -> Result<T>) -> Result<T> {
        let mut guard = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|s| s.len() < bytes) {
            *guard = Some(self.stream.alloc_zeros::<u8>(bytes.max(256).next_power_of_two()).map_err(device_error)?);
        }
        f(guard.as_mut().unwrap())
    }

    /// Reduces host integers in place through the staging buffer.
    fn reduce_host(&self, values: &mut [i64], op: c_int, what: &str) -> Result<()> {
        if self.world == 1 || values.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::size_of_val(values);
        self.with_staging(bytes, |buf| {
            let host: &[u8] = values.to_byte_slice();
            self.stream.memcpy_htod(host, &mut buf.slice_mut(..bytes)).map_err(device_error)?;
            let (ptr, _sync) = buf.device_ptr_mut(&self.stream);
            let ptr = ptr as *mut c_void;
            // SAFETY: `ptr` holds `values.len()` i64 on this communicator's GPU.
            self.grouped(what, || {
                self.check(what, unsafe {
                    (self.api.all_reduce)(ptr, ptr, values.len(), INT64, op, self.comm, self.stream.cu_stream())
                })
            })?;
            drop(_sync);
            let back = self.stream.clone_dtoh(&buf.slice(..bytes)).map_err(device_error)?;
            for (v, b) in values.iter_mut().zip(back.chunks_exact(8)) {
                *v = i64::from_le_bytes(b.try_into().unwrap());
            }
            Ok(())
        })
    }
}

impl Collective for NcclComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn all_reduce_sum(&self, values: &mut [i64]) -> Result<()> {
        self.reduce_host(values, SUM, "summing over the GPUs")
    }

    fn all_reduce_max(&self, values: &mut [i64]) -> Result<()> {
        self.reduce_host(values, MAX, "taking maxima over the GPUs")
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut lens = vec![0i64; self.world];
        lens[self.rank] = mine.len() as i64;
        self.all_reduce_sum(&mut lens)?;
        let width = lens.iter().copied().max().unwrap_or(0) as usize;
        if width == 0 || self.world == 1 {
            return Ok(lens.iter().map(|_| mine.to_vec()).take(self.world).collect());
        }
        let what = "gathering from the GPUs";
        let gathered = self.with_staging(width * (self.world + 1), |buf| {
            // Past this rank's bytes the send buffer holds whatever it held: its peers read
            // only `lens[rank]` of it.
            if !mine.is_empty() {
                self.stream.memcpy_htod(mine, &mut buf.slice_mut(..mine.len())).map_err(device_error)?;
            }
            let (base, sync) = buf.device_ptr_mut(&self.stream);
            let (send, recv) = (base as *const c_void, (base as usize + width) as *mut c_void);
            // SAFETY: the buffer holds `width` bytes to send, then `world * width` to receive.
            self.grouped(what, || {
                self.check(what, unsafe {
                    (self.api.all_gather)(send, recv, width, UINT8, self.comm, self.stream.cu_stream())
                })
            })?;
            drop(sync);
            // Each rank's bytes straight into their own vector: no copy of the whole on the
            // host (tens of MB when the workers gather their labels).
            (0..self.world)
                .map(|r| {
                    let from = width * (r + 1);
                    let len = lens[r] as usize;
                    if len == 0 {
                        return Ok(Vec::new());
                    }
                    self.stream.clone_dtoh(&buf.slice(from..from + len)).map_err(device_error)
                })
                .collect::<Result<Vec<_>>>()
        })?;
        Ok(gathered)
    }

    fn broadcast(&self, mine: &[u8], root: usize) -> Result<Vec<u8>> {
        let mut len = [if self.rank == root { mine.len() as i64 } else { 0 }];
        self.all_reduce_sum(&mut len)?;
        let len = len[0] as usize;
        if len == 0 || self.world == 1 {
            return Ok(mine[..len.min(mine.len())].to_vec());
        }
        let what = "broadcasting to the GPUs";
        self.with_staging(len, |buf| {
            if self.rank == root {
                self.stream.memcpy_htod(mine, &mut buf.slice_mut(..len)).map_err(device_error)?;
            }
            let (ptr, sync) = buf.device_ptr_mut(&self.stream);
            let ptr = ptr as *mut c_void;
            // SAFETY: the buffer holds `len` bytes, sent from root's and received in place.
            self.grouped(what, || {
                self.check(what, unsafe {
                    (self.api.broadcast)(ptr, ptr, len, UINT8, root as c_int, self.comm, self.stream.cu_stream())
                })
            })?;
            drop(sync);
            self.stream.clone_dtoh(&buf.slice(..len)).map_err(device_error)
        })
    }

    fn device_sums(&self) -> Option<&dyn DeviceSums> {
        Some(self)
    }
}

impl DeviceSums for NcclComm {
    fn ordinal(&self) -> usize {
        self.ordinal
    }

    unsafe fn queue_in_place(&self, buffers: &[DeviceReduction]) -> Result<()> {
        if self.world == 1 || buffers.is_empty() {
            return Ok(());
        }
        let what = "summing histograms over the GPUs";
        self.queue_group(what, || {
            for b in buffers {
                let (dtype, op) = match b.op {
                    DeviceOp::SumI64 => (INT64, SUM),
                    DeviceOp::SumU32 => (UINT32, SUM),
                    DeviceOp::MaxU32 => (UINT32, MAX),
                };
                let p = b.address as *mut c_void;
                // SAFETY: the caller's buffers hold `len` elements of the type each on this GPU.
                self.check(what, unsafe {
                    (self.api.all_reduce)(p, p, b.len, dtype, op, self.comm, self.stream.cu_stream())
                })?;
            }
            Ok(())
        })
    }

    fn wait(&self, what: &str) -> Result<()> {
        self.usable(what)?;
        self.wait_stream(what, Instant::now() + self.timeout)
    }

    unsafe fn gather_in_place(&self, parts: &[(u64, u64)], bytes: usize) -> Result<()> {
        let what = "gathering the cut points' samples from the GPUs";
        self.grouped(what, || {
            for &(send, receive) in parts {
                // SAFETY: the caller's `send` holds `bytes` bytes and `receive` world x bytes.
                self.check(what, unsafe {
                    (self.api.all_gather)(
                        send as *const c_void,
                        receive as *mut c_void,
                        bytes,
                        UINT8,
                        self.comm,
                        self.stream.cu_stream(),
                    )
                })?;
            }
            Ok(())
        })
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        if self.broken.load(Ordering::SeqCst) || self.comm.is_null() {
            return;
        }
        if self.peer_failed.load(Ordering::SeqCst) {
            let _ = self.fail(String::new());
            return;
        }
        // A clean end: flush, wait for the peers (bounded), free. An end that fails is aborted.
        let _ = self.stream.context().bind_to_thread();
        // SAFETY: the communicator is not used after this.
        let flushed = unsafe { (self.api.finalize)(self.comm) };
        let done = (flushed == SUCCESS || flushed == IN_PROGRESS)
            && self.settle("closing the communicator", Instant::now() + self.timeout).is_ok();
        if done {
            // SAFETY: finalised; destroying frees it.
            unsafe { (self.api.destroy)(self.comm) };
        } else {
            let _ = self.fail(String::new());
        }
    }
}
