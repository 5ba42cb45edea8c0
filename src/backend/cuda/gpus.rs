//! Several GPUs of one process: one thread per GPU, each with its GPU's runtime and one rank
//! of an NCCL communicator over all of them. Each thread runs the same fit, as one worker of
//! a distributed fit (the booster gives it its shard of rows), so the growth driver is the
//! one every fit uses; only the collective differs. Runtimes and communicators are kept for
//! the process, so a second fit on the same GPUs starts nothing.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::nccl::{self, NcclComm};
use super::runtime::{device_count, runtime_on, take_whole_turns};
use crate::collective::Collective;
use crate::error::{panic_message, Error, Result};

/// How long a GPU waits for the others at one exchange before the fit fails: long enough for
/// the slowest GPU's binning of its shard, short of a hang.
pub const GPU_TIMEOUT: Duration = Duration::from_secs(600);

/// The communicators of GPUs `0..k`, kept for the process after a fit that ended well, with
/// the flag their ranks share: a second fit on the same GPUs starts no communicator and tears
/// none down (NCCL's start-up and teardown were most of a short fit's cost over several GPUs).
struct KeptComms {
    comms: Vec<NcclComm>,
    failed: Arc<AtomicBool>,
}

/// The kept communicators, by GPU count. A fit takes its set out while it runs (it holds every
/// GPU of the set, `Runtime::take_turn`) and puts it back only if every rank succeeded; after
/// a failure the set is dropped (aborted) and the next fit starts a new one.
static KEPT: Mutex<BTreeMap<usize, KeptComms>> = Mutex::new(BTreeMap::new());

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
    // Each GPU to this fit alone, all taken together (`take_whole_turns`); the workers' fits
    // then take no turn of their own.
    let _turns = take_whole_turns(&runtimes);
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).remove(&k);
    let (comms, failed, id): (Vec<Option<NcclComm>>, _, _) = match kept {
        Some(set) if set.comms.iter().all(NcclComm::is_usable) => {
            set.failed.store(false, Ordering::SeqCst);
            (set.comms.into_iter().map(Some).collect(), set.failed, None)
        }
        stale => {
            // A set with a broken rank is aborted (its flag set: no rank waits to close), and
            // a new one started.
            if let Some(set) = stale {
                set.failed.store(true, Ordering::SeqCst);
            }
            ((0..k).map(|_| None).collect(), Arc::new(AtomicBool::new(false)), Some(nccl::unique_id()?))
        }
    };
    let first_failure = Mutex::new(None::<usize>);
    let outcomes: Vec<(Result<T>, Option<NcclComm>)> = std::thread::scope(|scope| {
        let threads: Vec<_> = runtimes
            .iter()
            .zip(comms)
            .enumerate()
            .map(|(rank, (rt, kept))| {
                let (failed, work, first_failure, id) = (failed.clone(), &work, &first_failure, &id);
                scope.spawn(move || {
                    let fail = |rank: usize| {
                        if !failed.swap(true, Ordering::SeqCst) {
                            *first_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(rank);
                        }
                    };
                    let comm = match (kept, id) {
                        (Some(comm), _) => comm,
                        (None, Some(id)) => match NcclComm::join(rt, id, rank, k, GPU_TIMEOUT, failed.clone()) {
                            Ok(comm) => comm,
                            Err(e) => {
                                fail(rank);
                                return (Err(e), None);
                            }
                        },
                        (None, None) => unreachable!("a kept set has every rank's communicator"),
                    };
                    let out = catch_unwind(AssertUnwindSafe(|| work(rank, &comm))).unwrap_or_else(|panic| {
                        Err(Error::Device(format!(
                            "the fit on GPU {rank} stopped on a bug (a panic), please report it: {}",
                            panic_message(panic)
                        )))
                    });
                    // Marked before any communicator closes: closing then aborts it rather
                    // than waiting for the others.
                    if out.is_err() {
                        fail(rank);
                    }
                    (out, Some(comm))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| (Err(Error::Device("a GPU's thread stopped on a bug (a panic)".into())), None))
            })
            .collect()
    });
    let (results, comms): (Vec<Result<T>>, Vec<Option<NcclComm>>) = outcomes.into_iter().unzip();
    if failed.load(Ordering::SeqCst) || results.iter().any(Result::is_err) {
        // Every rank sees the failure flag: dropping aborts their communicators.
        failed.store(true, Ordering::SeqCst);
        drop(comms);
    } else if let Some(comms) = comms.into_iter().collect::<Option<Vec<_>>>() {
        KEPT.lock().unwrap_or_else(|p| p.into_inner()).insert(k, KeptComms { comms, failed });
    }
    let first = first_failure.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or(0);
    results.into_iter().nth(first).expect("one result per GPU")
}

/// One rank of an NCCL communicator over the GPUs of a distributed fit's workers (each in its
/// own process, e.g. a Dask worker, training on its GPU `ordinal`), started from rank 0's
/// unique id sent through `host`, the workers' host collective. Dropped after the fit.
///
/// The worker's GPU is the fit's alone while the communicator lives (its exchanges are queued
/// on the runtime's stream: another fit's work interleaved there could wait on this one's).
pub fn join_workers(host: &dyn Collective, ordinal: usize, timeout: Duration) -> Result<NcclComm> {
    let rt = runtime_on(ordinal)?;
    let turn = take_whole_turns(std::slice::from_ref(&rt)).pop().expect("one GPU's turn");
    let id = if host.rank() == 0 { nccl::unique_id()?.to_bytes() } else { Vec::new() };
    let id = nccl::UniqueId::from_bytes(&host.broadcast(&id, 0)?)?;
    let comm = NcclComm::join(&rt, &id, host.rank(), host.world(), timeout, Arc::new(AtomicBool::new(false)))?;
    Ok(comm.holding(turn))
}
