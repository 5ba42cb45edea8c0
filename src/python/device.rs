//! Scoring arrays that lie in GPU memory (cupy, torch, JAX, ...): the two protocols such
//! arrays speak, DLPack (`__dlpack__` / `__dlpack_device__`) and the CUDA Array Interface
//! (`__cuda_array_interface__`, version 3), read here; the scoring is the crate's
//! (`Model::predict_device`, the CUDA backend's `GpuForest`). Nothing is copied to the host.
//!
//! Streams: the crate queues its work on a stream of its own and hands its handle to the
//! export here. A DLPack array is exported with `__dlpack__(stream=handle)`, so its producer
//! makes that stream wait for the work it has queued on the array; a CUDA Array Interface's
//! `stream` (when not None) is waited for through an event. The call returns once the scores
//! are written, so any stream may read them then.

use std::ffi::{c_void, CStr};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::model_cache;
use crate::config::Device;
use crate::prediction::{DeviceBinding, DeviceFloat, DeviceOut, DeviceRows};
use crate::{Error, PredictOutput};

/// DLPack's `DLDevice`, `DLDataType`, `DLTensor` and `DLManagedTensor` (dlpack.h, the
/// unversioned ABI that `__dlpack__()` returns without `max_version`).
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DL_ROCM_HOST: i32 = 11;
const DL_CUDA_MANAGED: i32 = 13;

/// An element type as the protocols state it.
#[derive(Clone, Debug, PartialEq)]
enum Dtype {
    F32,
    F64,
    U32,
    I32,
    /// Anything else, by name ("int64", "float16", ...).
    Other(String),
}

impl Dtype {
    fn name(&self) -> String {
        match self {
            Dtype::F32 => "float32".into(),
            Dtype::F64 => "float64".into(),
            Dtype::U32 => "uint32".into(),
            Dtype::I32 => "int32".into(),
            Dtype::Other(name) => name.clone(),
        }
    }

    fn item_bytes(&self) -> usize {
        match self {
            Dtype::F64 => 8,
            _ => 4,
        }
    }

    /// From a kind (`f`, `i`, `u`, `b`, `c`) and a width in bits.
    fn of(kind: char, bits: usize) -> Dtype {
        match (kind, bits) {
            ('f', 32) => Dtype::F32,
            ('f', 64) => Dtype::F64,
            ('u', 32) => Dtype::U32,
            ('i', 32) => Dtype::I32,
            ('f', b) => Dtype::Other(format!("float{b}")),
            ('i', b) => Dtype::Other(format!("int{b}")),
            ('u', b) => Dtype::Other(format!("uint{b}")),
            ('b', _) => Dtype::Other("bool".into()),
            ('c', b) => Dtype::Other(format!("complex{b}")),
            ('B', b) => Dtype::Other(format!("bfloat{b}")),
            (k, b) => Dtype::Other(format!("kind {k:?} of {b} bits")),
        }
    }
}

/// An array as its protocol describes it: the address of element 0, the shape, the strides
/// in elements, the element type, and the stream whose work must finish before it is used.
#[derive(Debug)]
struct Described {
    ptr: u64,
    shape: Vec<i64>,
    strides: Vec<i64>,
    dtype: Dtype,
    wait: Option<u64>,
}

/// A DLPack device type's name, for messages.
fn device_name(device_type: i32) -> String {
    match device_type {
        DL_CPU => "CPU".into(),
        DL_CUDA => "CUDA".into(),
        DL_CUDA_HOST => "CUDA host (pinned)".into(),
        4 => "OpenCL".into(),
        7 => "Vulkan".into(),
        8 => "Metal".into(),
        10 => "ROCm".into(),
        DL_ROCM_HOST => "ROCm host".into(),
        DL_CUDA_MANAGED => "CUDA managed".into(),
        14 => "oneAPI".into(),
        t => format!("type {t}"),
    }
}

/// Where a DLPack array lies, checked before it is exported: host memory is an error that
/// says how to score it, and so is any device but the first CUDA GPU (the one we score on).
fn check_dlpack_device(what: &str, device_type: i32, device_id: i32) -> crate::Result<()> {
    match device_type {
        DL_CPU | DL_CUDA_HOST | DL_ROCM_HOST => Err(Error::data(format!(
            "{what} is in host memory (DLPack device {}); arrays are scored where they lie, on the GPU: \
             score host data as a Polars frame, e.g. pl.from_numpy(array, schema=model.feature_names)",
            device_name(device_type)
        ))),
        DL_CUDA if device_id != 0 => Err(Error::data(format!(
            "{what} is on GPU {device_id}, and polars-gbt scores on GPU 0: move the array there \
             (or make that GPU the first visible one with CUDA_VISIBLE_DEVICES)"
        ))),
        DL_CUDA | DL_CUDA_MANAGED => Ok(()),
        t => Err(Error::data(format!("{what} is on a {} device; only CUDA GPUs are supported", device_name(t)))),
    }
}

/// A Python error raised by the array's own protocol methods, as our DataError.
fn protocol_error(what: &str, method: &str, e: PyErr) -> Error {
    Error::data(format!("{what}'s {method} failed: {e}"))
}

/// Strides of a C-order (row-major) array of `shape`, in elements.
fn c_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    strides
}

/// Reads `obj` through DLPack (exported to `stream`; the capsule is kept in `keep`, so the
/// producer's memory stays alive until the call is over) or else through the CUDA Array
/// Interface.
fn describe<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
    stream: u64,
    keep: &mut Vec<Bound<'py, PyAny>>,
) -> crate::Result<Described> {
    let has = |name: &str| obj.hasattr(name).unwrap_or(false);
    if has("__dlpack__") && has("__dlpack_device__") {
        let device = obj.call_method0("__dlpack_device__").map_err(|e| protocol_error(what, "__dlpack_device__", e))?;
        let (device_type, device_id) =
            device.extract::<(i32, i32)>().map_err(|e| protocol_error(what, "__dlpack_device__", e))?;
        check_dlpack_device(what, device_type, device_id)?;
        let kwargs = PyDict::new(obj.py());
        kwargs.set_item("stream", stream).map_err(|e| protocol_error(what, "__dlpack__", e))?;
        let capsule =
            obj.call_method("__dlpack__", (), Some(&kwargs)).map_err(|e| protocol_error(what, "__dlpack__", e))?;
        let described = read_capsule(&capsule, what)?;
        keep.push(capsule);
        // cupy (14.2) exports a negative stride divided by the item size as an unsigned number
        // (-16 elements as 2^61 - 16): such strides span more than the address space. Its
        // CUDA Array Interface states them right, so the array is read from there instead.
        if strides_overflow(&described) && has("__cuda_array_interface__") {
            if let Ok(iface) = obj.getattr("__cuda_array_interface__") {
                return read_interface(&iface, what);
            }
        }
        return Ok(described);
    }
    match obj.getattr("__cuda_array_interface__") {
        Ok(iface) => read_interface(&iface, what),
        Err(_) => Err(Error::data(format!(
            "{what} (a {}) is not an array in GPU memory: it has neither __dlpack__ nor __cuda_array_interface__",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
        ))),
    }
}

/// Whether an array of elements has strides whose byte span does not fit the address space.
fn strides_overflow(d: &Described) -> bool {
    let dims: Vec<(usize, i64)> = d.shape.iter().zip(&d.strides).map(|(&n, &s)| (n.max(0) as usize, s)).collect();
    dims.iter().all(|&(n, _)| n > 0) && crate::prediction::byte_span(d.ptr, &dims, d.dtype.item_bytes()).is_none()
}

/// A `dltensor` capsule's array. The capsule is not consumed (not renamed): its own
/// destructor hands the tensor back to the producer when it is dropped.
fn read_capsule(capsule: &Bound<'_, PyAny>, what: &str) -> crate::Result<Described> {
    const NAME: &CStr = c"dltensor";
    // SAFETY: the capsule API on a live object; IsValid checks the type and name without
    // raising, and GetPointer then returns the non-null pointer the producer stored.
    let managed = unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule.as_ptr(), NAME.as_ptr()) != 1 {
            return Err(Error::data(format!("{what}'s __dlpack__ did not return an unused \"dltensor\" capsule")));
        }
        pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), NAME.as_ptr()) as *const DlManagedTensor
    };
    if managed.is_null() {
        return Err(Error::data(format!("{what}'s DLPack capsule holds no tensor")));
    }
    // SAFETY: a "dltensor" capsule holds a DLManagedTensor, which stays valid while the
    // capsule lives (the caller keeps it); its shape and strides hold `ndim` values each.
    let t = unsafe { &(*managed).dl_tensor };
    if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
        return Err(Error::data(format!("{what}'s DLPack tensor has a bad shape (ndim {})", t.ndim)));
    }
    let ndim = t.ndim as usize;
    let shape = if ndim == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec() };
    let strides = if t.strides.is_null() || ndim == 0 {
        c_strides(&shape)
    } else {
        unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec()
    };
    let dtype = if t.dtype.lanes != 1 {
        Dtype::Other(format!("a vector type of {} lanes", t.dtype.lanes))
    } else {
        let kind = match t.dtype.code {
            0 => 'i',
            1 => 'u',
            2 => 'f',
            4 => 'B',
            5 => 'c',
            6 => 'b',
            _ => '?',
        };
        Dtype::of(kind, t.dtype.bits as usize)
    };
    Ok(Described { ptr: (t.data as u64).wrapping_add(t.byte_offset), shape, strides, dtype, wait: None })
}

/// A `__cuda_array_interface__` dictionary's array (version 2 or 3).
fn read_interface(iface: &Bound<'_, PyAny>, what: &str) -> crate::Result<Described> {
    let bad = |why: String| Error::data(format!("{what}'s __cuda_array_interface__ {why}"));
    let iface = iface.cast::<PyDict>().map_err(|_| bad("is not a dict".into()))?;
    let get = |key: &str| iface.get_item(key).ok().flatten().filter(|v| !v.is_none());
    let shape: Vec<i64> = get("shape")
        .ok_or_else(|| bad("has no shape".into()))?
        .extract()
        .map_err(|_| bad("has a shape that is not a tuple of integers".into()))?;
    if shape.iter().any(|&n| n < 0) {
        return Err(bad(format!("has a negative extent in its shape {shape:?}")));
    }
    let typestr: String = get("typestr")
        .ok_or_else(|| bad("has no typestr".into()))?
        .extract()
        .map_err(|_| bad("has a typestr that is not a string".into()))?;
    let dtype =
        parse_typestr(&typestr).ok_or_else(|| bad(format!("has typestr {typestr:?}, which is not a number type")))?;
    let data = get("data").ok_or_else(|| bad("has no data".into()))?;
    let data = data.cast::<PyTuple>().map_err(|_| bad("has data that is not a (pointer, read-only) tuple".into()))?;
    let ptr: u64 = data
        .get_item(0)
        .and_then(|p| p.extract())
        .map_err(|_| bad("has a data pointer that is not an integer".into()))?;
    if get("mask").is_some() {
        return Err(bad("has a mask: masked arrays are not supported (fill the masked values with NaN)".into()));
    }
    let item = dtype.item_bytes() as i64;
    let strides = match get("strides") {
        None => c_strides(&shape),
        Some(s) => {
            let bytes: Vec<i64> = s.extract().map_err(|_| bad("has strides that are not integers".into()))?;
            if bytes.len() != shape.len() {
                return Err(bad(format!("has {} strides for {} dimensions", bytes.len(), shape.len())));
            }
            if let Some(b) = bytes.iter().find(|&&b| b % item != 0) {
                return Err(bad(format!("has a stride of {b} bytes, not a whole number of {}-byte elements", item)));
            }
            bytes.iter().map(|b| b / item).collect()
        }
    };
    let wait = match get("stream") {
        None => None,
        Some(s) => match s.extract::<u64>() {
            Ok(0) => return Err(bad("names stream 0, which the interface disallows (ambiguous)".into())),
            Ok(handle) => Some(handle),
            Err(_) => return Err(bad("has a stream that is not an integer".into())),
        },
    };
    Ok(Described { ptr, shape, strides, dtype, wait })
}

/// A typestr's element type (`<f4`, `<f8`, `|u1`, ...); None when it is no number.
fn parse_typestr(typestr: &str) -> Option<Dtype> {
    let mut chars = typestr.chars();
    let order = chars.next()?;
    let kind = chars.next()?;
    let bytes: usize = chars.as_str().parse().ok()?;
    if !matches!(kind, 'f' | 'i' | 'u' | 'b' | 'c') {
        return None;
    }
    if order == '>' && bytes > 1 {
        return Some(Dtype::Other(format!("big-endian {}", Dtype::of(kind, bytes * 8).name())));
    }
    Some(Dtype::of(kind, bytes * 8))
}

/// The rows to score, checked: two dimensions, float32 or float64.
fn rows_of(x: &Described) -> crate::Result<DeviceRows> {
    if x.shape.len() != 2 {
        return Err(Error::data(format!(
            "the array must be 2-D (rows x the model's features), not {}-D of shape {:?}",
            x.shape.len(),
            x.shape
        )));
    }
    let dtype = match &x.dtype {
        Dtype::F32 => DeviceFloat::F32,
        Dtype::F64 => DeviceFloat::F64,
        other => {
            return Err(Error::data(format!(
                "the array has dtype {}; device arrays are scored as float32 or float64 (cast it, e.g. \
                 x.astype(\"float32\")); categorical features hold their category codes as floats",
                other.name()
            )))
        }
    };
    Ok(DeviceRows {
        ptr: x.ptr,
        rows: x.shape[0] as usize,
        cols: x.shape[1] as usize,
        row_stride: x.strides[0],
        col_stride: x.strides[1],
        dtype,
    })
}

/// The output, checked: C-contiguous float32, or uint32 / int32 for indices.
fn out_of(o: &Described) -> crate::Result<DeviceOut> {
    let index = match o.dtype {
        Dtype::F32 => false,
        Dtype::U32 | Dtype::I32 => true,
        ref other => return Err(Error::data(format!("the output array has dtype {}", other.name()))),
    };
    let contiguous = o.shape.contains(&0)
        || o.shape.iter().zip(&o.strides).zip(c_strides(&o.shape)).all(|((&n, &s), c)| n == 1 || s == c);
    if !contiguous {
        return Err(Error::data(format!("the output array is not C-contiguous (strides {:?})", o.strides)));
    }
    Ok(DeviceOut { ptr: o.ptr, len: o.shape.iter().product::<i64>() as usize, index })
}

fn py_error(e: Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The parsed model of `model`'s bytes (its `rounds`), from the process's model cache.
fn cached_model(
    model: &[u8],
    rounds: model_cache::Rounds,
    digest: Option<&str>,
) -> PyResult<std::sync::Arc<model_cache::CachedModel>> {
    match digest {
        Some(digest) => model_cache::by_digest(digest, model, rounds).map_err(|e| PyValueError::new_err(e.to_string())),
        None => model_cache::by_content(model, rounds).map_err(py_error),
    }
}

/// Scores `data` (rows x features in GPU memory, DLPack or CUDA Array Interface) with the
/// model of `model` (its `iteration_range` rounds) into `out`, an array the caller made in GPU
/// memory with `output_shape`'s shape per row. Returns when the scores are written.
/// `digest`, the Python package's BLAKE2b of the bytes (computed once per `Model`), finds the
/// parsed model without checksumming and comparing megabytes of a deep forest every call.
#[pyfunction]
#[pyo3(signature = (model, output, data, out, iteration_range=None, digest=None))]
pub(super) fn predict_device(
    model: &[u8],
    output: &str,
    data: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    iteration_range: Option<(usize, usize)>,
    digest: Option<&str>,
) -> PyResult<()> {
    super::catch_panics_py(|| {
        let output: PredictOutput = output.parse().map_err(py_error)?;
        let cached = cached_model(model, iteration_range, digest)?;
        let engine = crate::backend::for_scoring(Device::Cuda).map_err(py_error)?;
        let forest = cached.predictor(engine.backend()).map_err(PyValueError::new_err)?;
        let mut keep = Vec::new();
        let mut export = |stream: u64| -> crate::Result<DeviceBinding> {
            let x = describe(data, "the array", stream, &mut keep)?;
            let rows = rows_of(&x)?;
            let o = describe(out, "the output array", stream, &mut keep)?;
            let out = out_of(&o)?;
            Ok(DeviceBinding { rows, out, wait_for: x.wait.into_iter().chain(o.wait).collect() })
        };
        let scored = cached.model.predict_device(&*forest, output, &mut export);
        drop(keep);
        scored.map_err(py_error)
    })
}

/// What `output` gives per row for the model: its shape (empty: one value) and whether the
/// values are indices (uint32) rather than float32.
#[pyfunction]
#[pyo3(signature = (model, output, iteration_range=None, digest=None))]
pub(super) fn output_shape(
    model: &[u8],
    output: &str,
    iteration_range: Option<(usize, usize)>,
    digest: Option<&str>,
) -> PyResult<(Vec<usize>, bool)> {
    super::catch_panics_py(|| {
        let output: PredictOutput = output.parse().map_err(py_error)?;
        let cached = cached_model(model, iteration_range, digest)?;
        Ok(cached.model.output_shape(output))
    })
}
