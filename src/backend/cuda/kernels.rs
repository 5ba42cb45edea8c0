//! The CUDA sources, compiled at run time by NVRTC for the device's own architecture. NVRTC
//! has no include path here, so `common.cuh` is concatenated before the kernel files.
//!
//! The runtime compiles to machine code (CUBIN) for the exact architecture, not PTX: the
//! driver then loads it without a JIT step (0.4 s on an H100 when its own cache is cold), and
//! an NVRTC newer than the driver still works. The CUBIN is kept in a per-user cache
//! directory, keyed by the source, the architecture and the options, so later processes skip
//! the compile (1 s); set `POLARS_GBT_KERNEL_CACHE=0` to turn the cache off, or
//! `POLARS_GBT_CACHE_DIR` to move it.

use std::ffi::{c_char, CString};
use std::path::PathBuf;

use cudarc::nvrtc::{compile_ptx_with_opts, result, sys, CompileError, CompileOptions};

/// Every kernel, as one translation unit.
pub const SOURCE: &str = concat!(
    include_str!("../../../kernels/common.cuh"),
    include_str!("../../../kernels/math.cuh"),
    include_str!("../../../kernels/binning.cu"),
    include_str!("../../../kernels/gradients.cu"),
    include_str!("../../../kernels/ranking.cu"),
    include_str!("../../../kernels/histogram.cu"),
    include_str!("../../../kernels/split.cu"),
    include_str!("../../../kernels/split_categorical.cu"),
    include_str!("../../../kernels/split_vector.cu"),
    include_str!("../../../kernels/partition.cu"),
    include_str!("../../../kernels/refit.cu"),
    include_str!("../../../kernels/metric.cu"),
    include_str!("../../../kernels/sparse.cu"),
    include_str!("../../../kernels/columns.cu"),
    include_str!("../../../kernels/predict.cu"),
    include_str!("../../../kernels/shap.cu"),
);

/// NVRTC options. Every float operation must round exactly as the CPU's (the split arithmetic,
/// and the gradients through kernels/math.cuh): no FMA contraction, subnormals kept, and IEEE
/// division and square roots (the last two are NVRTC's defaults, named so they stay).
fn options(arch: &str) -> CompileOptions {
    CompileOptions {
        fmad: Some(false),
        options: vec![
            format!("--gpu-architecture={arch}"),
            "--std=c++17".into(),
            "--ftz=false".into(),
            "--prec-div=true".into(),
            "--prec-sqrt=true".into(),
        ],
        ..Default::default()
    }
}

/// Compiles `source` for `arch` (e.g. `sm_90`) and returns the PTX (for inspection and the
/// layout probe; the runtime loads machine code). Needs libnvrtc, no GPU.
pub fn compile(source: &str, arch: &str) -> Result<String, String> {
    match compile_ptx_with_opts(source, options(arch)) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => {
            Err(format!("NVRTC could not compile the kernels for {arch}:\n{}", log.to_string_lossy()))
        }
        Err(e) => Err(format!("NVRTC failed for {arch}: {e:?}")),
    }
}

fn cache_dir() -> Option<PathBuf> {
    if std::env::var_os("POLARS_GBT_KERNEL_CACHE").is_some_and(|v| v == "0") {
        return None;
    }
    if let Some(d) = std::env::var_os("POLARS_GBT_CACHE_DIR") {
        return Some(PathBuf::from(d).join("kernels"));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("polars-gbt").join("kernels"))
}

/// Compiles `source` to machine code for `arch` (e.g. `sm_90`). Needs libnvrtc, no GPU.
pub fn compile_cubin(source: &str, arch: &str) -> Result<Vec<u8>, String> {
    let src = CString::new(source).map_err(|e| e.to_string())?;
    let name = CString::new("polars_gbt.cu").unwrap();
    let prog = result::create_program(&src, Some(&name)).map_err(|e| format!("NVRTC failed: {e:?}"))?;
    let options = options(arch);
    let mut flags = options.options.clone();
    flags.push("--fmad=false".into());
    // SAFETY: `prog` is a live program; every pointer passed below outlives the calls.
    let out = unsafe {
        match result::compile_program(prog, &flags) {
            Err(e) => {
                let log = result::get_program_log(prog).unwrap_or_default();
                let log: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                Err(format!(
                    "NVRTC could not compile the kernels for {arch} ({e:?}):\n{}",
                    String::from_utf8_lossy(&log)
                ))
            }
            Ok(()) => {
                let mut size = 0usize;
                let r = sys::nvrtcGetCUBINSize(prog, &mut size);
                if r != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                    Err(format!("NVRTC produced no machine code for {arch} ({r:?})"))
                } else {
                    let mut cubin = vec![0u8; size];
                    let r = sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char);
                    if r == sys::nvrtcResult::NVRTC_SUCCESS {
                        Ok(cubin)
                    } else {
                        Err(format!("NVRTC could not return the machine code for {arch} ({r:?})"))
                    }
                }
            }
        }
    };
    // SAFETY: the program is not used after this.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

/// The machine code of [`SOURCE`] for `arch`, from the disk cache when an earlier process
/// compiled it.
pub fn cubin_for(arch: &str) -> Result<Vec<u8>, String> {
    let key = {
        let mut h = crc32fast::Hasher::new();
        h.update(SOURCE.as_bytes());
        h.update(format!("{arch} {:?} --fmad=false", options(arch).options).as_bytes());
        h.finalize()
    };
    let path = cache_dir().map(|d| d.join(format!("{arch}-{key:08x}-{}.cubin", SOURCE.len())));
    if let Some(p) = &path {
        if let Ok(bytes) = std::fs::read(p) {
            // An ELF image; anything else (a torn or foreign file) is recompiled.
            if bytes.starts_with(b"\x7fELF") {
                return Ok(bytes);
            }
        }
    }
    let cubin = compile_cubin(SOURCE, arch)?;
    if let Some(p) = &path {
        // Best effort, and atomic: a reader sees a whole file or none.
        if let Some(dir) = p.parent() {
            if std::fs::create_dir_all(dir).is_ok() {
                let tmp = p.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, &cubin).is_ok() && std::fs::rename(&tmp, p).is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
        }
    }
    Ok(cubin)
}
