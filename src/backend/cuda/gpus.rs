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
use crate::collective::{Collective, DeviceSums};
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

/// A worker process's communicator (`join_workers`), kept for the process after a fit that
/// left it usable, with the identities of the processes it joins in rank order: the next fit
/// over the same processes uses it again instead of starting and tearing down another (NCCL's
/// start-up and teardown, tenths of a second each, were what a Dask fit over GPU workers paid
/// beyond the same fit over `n_gpus` in one process).
struct KeptWorkerComm {
    peers: Vec<u64>,
    comm: NcclComm,
}

/// By GPU (one worker process has one; threads standing for workers in a test have one each).
static KEPT_WORKER: Mutex<BTreeMap<usize, KeptWorkerComm>> = Mutex::new(BTreeMap::new());

/// This process, told apart from every other one of a fit's workers (also from an earlier
/// process restarted in its place).
fn process_identity() -> u64 {
    static IDENTITY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *IDENTITY.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        crate::random::hash64(std::process::id() as u64, nanos as u64 ^ (nanos >> 64) as u64)
    })
}

/// One rank of an NCCL communicator over the GPUs of a distributed fit's workers (each in its
/// own process, e.g. a Dask worker, training on its GPU `ordinal`), through `host`, the
/// workers' host collective: the one kept from the last fit when every worker still has it
/// for the same processes, else a new one started from rank 0's unique id sent over `host`.
///
/// The worker's GPU is the fit's alone while the returned collective lives (its exchanges are
/// queued on the runtime's stream: another fit's work interleaved there could wait on this
/// one's); when it is dropped, a usable communicator is kept for the next fit.
pub fn join_workers(host: &dyn Collective, ordinal: usize, timeout: Duration) -> Result<WorkerComm> {
    let rt = runtime_on(ordinal)?;
    let turn = take_whole_turns(std::slice::from_ref(&rt)).pop().expect("one GPU's turn");
    let peers: Vec<u64> = host
        .all_gather(&process_identity().to_le_bytes())?
        .into_iter()
        .map(|b| b.try_into().map(u64::from_le_bytes).unwrap_or(0))
        .collect();
    let kept = KEPT_WORKER.lock().unwrap_or_else(|p| p.into_inner()).remove(&ordinal);
    let fits = |k: &KeptWorkerComm| {
        k.peers == peers && k.comm.is_usable() && k.comm.rank() == host.rank() && k.comm.world() == host.world()
    };
    // Every worker must have it, or none uses it: a vote over the host collective first.
    let mut votes = [kept.as_ref().is_some_and(fits) as i64];
    host.all_reduce_sum(&mut votes)?;
    if let Some(mut k) = kept {
        if votes[0] == host.world() as i64 {
            k.comm.set_timeout(timeout);
            return Ok(WorkerComm { comm: Some(k.comm.holding(turn)), peers });
        }
        k.comm.abandon();
    }
    let id = if host.rank() == 0 { nccl::unique_id()?.to_bytes() } else { Vec::new() };
    let id = nccl::UniqueId::from_bytes(&host.broadcast(&id, 0)?)?;
    let comm = NcclComm::join(&rt, &id, host.rank(), host.world(), timeout, Arc::new(AtomicBool::new(false)))?;
    Ok(WorkerComm { comm: Some(comm.holding(turn)), peers })
}

/// A worker's communicator for one fit ([`join_workers`]); kept for the next fit when dropped
/// usable, with nothing left running on its stream.
pub struct WorkerComm {
    /// None only while being dropped.
    comm: Option<NcclComm>,
    peers: Vec<u64>,
}

impl WorkerComm {
    fn comm(&self) -> &NcclComm {
        self.comm.as_ref().expect("a live communicator")
    }
}

impl Drop for WorkerComm {
    fn drop(&mut self) {
        let Some(mut comm) = self.comm.take() else { return };
        if !comm.is_usable() || DeviceSums::wait(&comm, "ending the fit").is_err() {
            return; // dropped: aborted if broken, else closed with its peers
        }
        comm.release();
        let ordinal = DeviceSums::ordinal(&comm);
        let old = KEPT_WORKER
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ordinal, KeptWorkerComm { peers: std::mem::take(&mut self.peers), comm });
        if let Some(old) = old {
            old.comm.abandon();
        }
    }
}

impl Collective for WorkerComm {
    fn rank(&self) -> usize {
        self.comm().rank()
    }

    fn world(&self) -> usize {
        self.comm().world()
    }

    fn all_reduce_sum(&self, values: &mut [i64]) -> Result<()> {
        self.comm().all_reduce_sum(values)
    }

    fn all_reduce_max(&self, values: &mut [i64]) -> Result<()> {
        self.comm().all_reduce_max(values)
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.comm().all_gather(mine)
    }

    fn broadcast(&self, mine: &[u8], root: usize) -> Result<Vec<u8>> {
        self.comm().broadcast(mine, root)
    }

    fn device_sums(&self) -> Option<&dyn DeviceSums> {
        Some(self.comm())
    }
}
