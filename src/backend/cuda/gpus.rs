//! Several GPUs of one process: one thread per GPU, each with its GPU's runtime and one rank
//! of an NCCL communicator over all of them. Each thread runs the same fit, as one worker of
//! a distributed fit (the booster gives it its shard of rows), so the growth driver is the
//! one every fit uses; only the collective differs.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::nccl::{self, NcclComm};
use super::runtime::{device_count, runtime_on};
use crate::collective::Collective;
use crate::error::{panic_message, Error, Result};

/// How long a GPU waits for the others at one exchange before the fit fails: long enough for
/// the slowest GPU's binning of its shard, short of a hang.
pub const GPU_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `work(rank, collective)` on GPUs `0..k`, one thread each, and returns rank 0's
/// result. When a GPU's work fails, the others stop at their next exchange, and the error is
/// the first failure's (not the others' "stopped" errors).
pub fn on_each_gpu<T: Send>(k: usize, work: impl Fn(usize, &dyn Collective) -> Result<T> + Sync) -> Result<T> {
    let visible = device_count()?;
    if k > visible {
        return Err(Error::param("n_gpus", format!("is {k}, but the CUDA driver sees {visible} GPU(s)")));
    }
    nccl::probe().map_err(|why| Error::Device(format!("n_gpus={k} sums histograms through NCCL: {why}")))?;
    let runtimes = (0..k).map(runtime_on).collect::<Result<Vec<_>>>()?;
    // Each GPU to this fit alone, taken in ordinal order (two such fits cannot each hold a GPU
    // the other waits for); the workers' fits then take no turn of their own.
    let _turns: Vec<_> = runtimes.iter().map(|rt| rt.take_turn(true)).collect();
    let id = nccl::unique_id()?;
    let failed = Arc::new(AtomicBool::new(false));
    let first_failure = Mutex::new(None::<usize>);
    let results: Vec<Result<T>> = std::thread::scope(|scope| {
        let threads: Vec<_> = runtimes
            .iter()
            .enumerate()
            .map(|(rank, rt)| {
                let (failed, work, first_failure) = (failed.clone(), &work, &first_failure);
                scope.spawn(move || {
                    let run = || -> Result<T> {
                        let comm = NcclComm::join(rt, &id, rank, k, GPU_TIMEOUT, failed.clone())?;
                        let out = catch_unwind(AssertUnwindSafe(|| work(rank, &comm))).unwrap_or_else(|panic| {
                            Err(Error::Device(format!(
                                "the fit on GPU {rank} stopped on a bug (a panic), please report it: {}",
                                panic_message(panic)
                            )))
                        });
                        // Mark the failure before the communicator closes: closing then aborts
                        // it rather than waiting for the others.
                        if out.is_err() && !failed.swap(true, Ordering::SeqCst) {
                            *first_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(rank);
                        }
                        drop(comm);
                        out
                    };
                    let out = run();
                    if out.is_err() && !failed.swap(true, Ordering::SeqCst) {
                        *first_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(rank);
                    }
                    out
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join().unwrap_or_else(|_| Err(Error::Device("a GPU's thread stopped on a bug (a panic)".into())))
            })
            .collect()
    });
    let first = first_failure.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or(0);
    results.into_iter().nth(first).expect("one result per GPU")
}
