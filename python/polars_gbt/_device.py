"""Scoring arrays that already lie in GPU memory: cupy arrays, torch tensors on ``"cuda"``, JAX
arrays on a GPU, anything exposing DLPack (``__dlpack__`` / ``__dlpack_device__``) or the CUDA
Array Interface (``__cuda_array_interface__``). ``Model.predict`` and ``Model.contributions``
come here for such an array; the rows are scored where they lie and the scores are written
into a new device array, with no copy through the host. See the user guide's "Scoring arrays
on the GPU" for what the array must hold.

What can be checked without touching the GPU (the device, the shape, the dtype, as the array's
protocol states them) is checked here first, so that these errors come the same with or
without a usable GPU; the Rust side checks everything again on the array it is handed.
"""

from __future__ import annotations

from typing import Any

from polars_gbt import _internal
from polars_gbt._errors import DataError, DeviceError, ParameterError, translated

# DLPack device types (dlpack.h's DLDeviceType) in host memory, and the CUDA ones we score.
_HOST_DEVICES = {1: "CPU", 3: "CUDA host (pinned)", 11: "ROCm host"}
_CUDA, _CUDA_MANAGED = 2, 13


def is_device_array(data: Any) -> bool:
    """Whether ``data`` is an array speaking DLPack or the CUDA Array Interface (a numpy
    array is one too: it is then refused as host memory, with the way to score it)."""
    import polars as pl

    if isinstance(data, (pl.DataFrame, pl.LazyFrame, pl.Series)):
        return False
    if hasattr(data, "__dlpack__") and hasattr(data, "__dlpack_device__"):
        return True
    try:
        return hasattr(data, "__cuda_array_interface__")
    except Exception:  # a property that raises for this array (torch: requires_grad)
        return True


def _interface(data: Any) -> dict | None:
    try:
        iface = getattr(data, "__cuda_array_interface__", None)
    except Exception:
        return None  # the Rust side reads the array through DLPack (or reports the error)
    return iface if isinstance(iface, dict) else None


def _dtype_name(data: Any, iface: dict | None) -> str | None:
    """The element type as ``float32``, ``int64``, ... when the array says it plainly."""
    if iface is not None and isinstance(iface.get("typestr"), str):
        typestr = iface["typestr"]
        kinds = {"f": "float", "i": "int", "u": "uint", "b": "bool", "c": "complex"}
        if len(typestr) >= 3 and typestr[1] in kinds and typestr[2:].isdigit():
            kind = kinds[typestr[1]]
            return "bool" if kind == "bool" else f"{kind}{int(typestr[2:]) * 8}"
        return typestr
    dtype = getattr(data, "dtype", None)
    if dtype is None:
        return None
    return str(dtype).removeprefix("torch.")


def check_array(data: Any, n_features: int) -> None:
    """The checks that need no GPU: where the array lies, its shape and its dtype."""
    if hasattr(data, "__dlpack_device__"):
        try:
            device_type, device_id = data.__dlpack_device__()
        except Exception as e:
            raise DataError(f"the array's __dlpack_device__ failed: {e}") from e
        if device_type in _HOST_DEVICES:
            raise DataError(
                f"the array is in host memory (DLPack device {_HOST_DEVICES[device_type]}); arrays are "
                "scored where they lie, on the GPU: score host data as a Polars frame, e.g. "
                "pl.from_numpy(array, schema=model.feature_names)"
            )
        if device_type not in (_CUDA, _CUDA_MANAGED):
            raise DataError(f"the array is on DLPack device type {device_type}; only CUDA GPUs are supported")
        if device_type == _CUDA and device_id != 0:
            raise DataError(
                f"the array is on GPU {device_id}, and polars-gbt scores on GPU 0: move the array there "
                "(or make that GPU the first visible one with CUDA_VISIBLE_DEVICES)"
            )
    iface = _interface(data)
    shape = iface.get("shape") if iface is not None else getattr(data, "shape", None)
    if shape is not None:
        shape = tuple(shape)
        if len(shape) != 2:
            raise DataError(
                f"the array must be 2-D (rows x the model's features), not {len(shape)}-D of shape {shape}"
            )
        if shape[1] != n_features:
            raise DataError(
                f"the array has {shape[1]} columns but the model has {n_features} features; "
                "columns are the features by position"
            )
    dtype = _dtype_name(data, iface)
    if dtype is not None and dtype not in ("float32", "float64"):
        raise DataError(
            f"the array has dtype {dtype}; device arrays are scored as float32 or float64 (cast it, e.g. "
            'x.astype("float32")); categorical features hold their category codes as floats'
        )


def _empty(data: Any, shape: tuple[int, ...], index: bool) -> Any:
    """A new device array for the scores, made by the input's own library: cupy for cupy,
    torch for torch (int32 for indices: torch's uint32 has few operations), and cupy for any
    other producer (every DLPack consumer imports a cupy array: ``jax.dlpack.from_dlpack``)."""
    library = type(data).__module__.split(".")[0]
    if library == "torch":
        import torch

        return torch.empty(shape, dtype=torch.int32 if index else torch.float32, device=data.device)
    try:
        import cupy
    except ImportError as e:
        raise DeviceError(
            f"scores of a {type(data).__name__} array are returned as a cupy array, and cupy is not installed "
            "(pip install cupy-cuda13x); cupy and torch arrays are scored into arrays of their own library"
        ) from e
    with cupy.cuda.Device(0):
        return cupy.empty(shape, dtype=cupy.uint32 if index else cupy.float32)


def predict(
    model_bytes: bytes,
    digest: str,
    n_features: int,
    data: Any,
    *,
    output: str,
    device: str | None,
    base_margin: Any,
    iteration_range: tuple[int, int] | None,
) -> Any:
    """Scores the device array ``data``; returns the scores as a device array (see
    ``Model.predict``)."""
    from polars_gbt._namespace import rounds_range

    if device not in (None, "cuda", "auto"):
        raise ParameterError(
            f'invalid parameter `device`: "{device}" cannot score an array in GPU memory, which is scored '
            'on its GPU; leave device out (or pass "cuda")'
        )
    if base_margin is not None:
        raise ParameterError(
            "invalid parameter `base_margin`: not supported with an array in GPU memory; add the margins "
            'to output="margin" instead'
        )
    rounds = rounds_range(iteration_range) if iteration_range is not None else None
    check_array(data, n_features)
    reason = _internal.cuda_unavailable_reason()
    if reason is not None:
        raise DeviceError(f"an array in GPU memory is scored on the GPU, which cannot be used here: {reason}")
    with translated():
        per_row, index = _internal.output_shape(model_bytes, output, rounds, digest)
    shape = getattr(data, "shape", None)
    if shape is None:
        iface = _interface(data)
        shape = iface["shape"] if iface is not None else None
    if shape is None:
        raise DataError(f"the array (a {type(data).__name__}) states no shape")
    out = _empty(data, (int(shape[0]), *per_row), index)
    with translated():
        _internal.predict_device(model_bytes, output, data, out, rounds, digest)
    return out
