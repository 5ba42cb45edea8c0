//! Which engine runs a fit or a scoring: each [`Backend`]'s engine, the one `device` chooses
//! ("auto" takes the GPU when it can run, and says why not when it cannot), and the
//! collective a distributed fit's workers share. The one place that names every backend.

use super::engine::{Backend, Engine};
use super::{cpu, cuda};
use crate::collective::Collective;
use crate::config::{Device, TrainConfig};
use crate::error::{Error, Result};

impl Backend {
    /// The process's engine of this backend.
    pub fn engine(self) -> &'static dyn Engine {
        match self {
            Backend::Cpu => &cpu::engine::CpuEngine,
            Backend::Cuda => &cuda::engine::CudaEngine,
        }
    }
}

/// The engine for training `cfg`, and, when `device="auto"` chose the CPU, why.
/// `device="cuda"` that cannot run is an error that says why.
pub fn select(cfg: &TrainConfig) -> Result<(&'static dyn Engine, Option<String>)> {
    let obstacle = |e: &dyn Engine| e.availability().err().or_else(|| e.unsupported(cfg));
    choose(cfg.device, "train", &obstacle)
}

/// The collective a distributed fit's worker trains over: its devices' own (NCCL between the
/// GPUs of workers that each train on one, e.g. Dask GPU workers) when every worker's engine
/// has one, else `host` (the TCP ring, which CPU workers always use). The workers agree
/// through `host` first, so all take the same one.
pub fn device_collective(
    cfg: &TrainConfig,
    host: &dyn Collective,
    ordinal: usize,
    timeout: std::time::Duration,
) -> Result<Option<Box<dyn Collective + Send + Sync>>> {
    if host.world() == 1 {
        return Ok(None);
    }
    let engine = select(cfg).ok().map(|(engine, _)| engine);
    let able = engine.filter(|e| e.has_device_collective());
    let mut votes = [able.is_some() as i64];
    host.all_reduce_sum(&mut votes)?;
    match able {
        Some(engine) if votes[0] == host.world() as i64 => engine.join_devices(host, ordinal, timeout).map(Some),
        _ => Ok(None),
    }
}

/// The engine for scoring on `device` ("cuda" must be usable; "auto" takes it when it is).
pub fn for_scoring(device: Device) -> Result<&'static dyn Engine> {
    choose(device, "score", &|e: &dyn Engine| e.availability().err()).map(|(engine, _)| engine)
}

fn choose(
    device: Device,
    verb: &str,
    obstacle: &dyn Fn(&dyn Engine) -> Option<String>,
) -> Result<(&'static dyn Engine, Option<String>)> {
    let (cpu, gpu) = (Backend::Cpu.engine(), Backend::Cuda.engine());
    match device {
        Device::Cpu => Ok((cpu, None)),
        Device::Cuda => match obstacle(gpu) {
            None => Ok((gpu, None)),
            Some(why) => Err(Error::Device(format!("device=\"cuda\" cannot be used: {why}"))),
        },
        Device::Auto => match obstacle(gpu) {
            None => Ok((gpu, None)),
            Some(why) => Ok((cpu, Some(format!("device=\"auto\" {verb}s on the CPU: {why}")))),
        },
    }
}
