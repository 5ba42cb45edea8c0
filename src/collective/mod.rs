//! Collectives: how the workers of one fit (processes, machines, devices) agree. A fit on
//! several workers runs the same boosting loop and the same growth driver on each worker's
//! rows; the learner sums what depends on all rows (gradient scales, node totals, histograms)
//! through a [`Collective`], and the trainer gathers what must be computed once (cut-point
//! samples, category sets, the base score). Histograms are integer sums, so the sums are
//! exact and every worker takes the same split decisions: the trees equal a single worker's,
//! byte for byte.
//!
//! [`Solo`] is the collective of a fit on one worker: every operation returns at once.
//! [`ring::TcpRing`] connects processes through TCP (CPU workers); NCCL connects GPUs
//! (`backend::cuda::nccl`), in one process or several.

pub mod agree;
pub mod cuts;
pub mod ring;
pub mod shard;
pub mod sums;

pub use ring::{serve_tracker, RingConfig, TcpRing};
pub use shard::{even_ranges, RowSpans, Shard};
pub use sums::exact_sums;

use crate::error::{Error, Result};
use crate::tree::GradSum;

/// What the workers of one fit do together. Every worker calls the same operations in the
/// same order; an operation returns once every worker has taken part, or an error (a worker
/// gone, a deadline passed) that names the worker.
pub trait Collective: Send + Sync {
    /// This worker's position, `0..world()`.
    fn rank(&self) -> usize;
    /// How many workers take part.
    fn world(&self) -> usize;
    /// Element-wise sums over the workers, in place (exact: integers).
    fn all_reduce_sum(&self, values: &mut [i64]) -> Result<()>;
    /// Element-wise maxima over the workers, in place.
    fn all_reduce_max(&self, values: &mut [i64]) -> Result<()>;
    /// Every worker's bytes, in rank order.
    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Worker `root`'s bytes, on every worker (`mine` is read on `root` only).
    fn broadcast(&self, mine: &[u8], root: usize) -> Result<Vec<u8>>;
    /// Sums of device memory where it lies, for collectives that reach the GPU themselves
    /// (NCCL): the GPU learner then sums its histograms on the device, not through the host.
    fn device_sums(&self) -> Option<&dyn DeviceSums> {
        None
    }
}

/// A collective's sums of GPU memory (see [`Collective::device_sums`]).
pub trait DeviceSums {
    /// The GPU (CUDA device ordinal) this worker's buffers live on.
    fn ordinal(&self) -> usize;
    /// Queues the reduction of each buffer over the workers, in place, as one exchange on the
    /// stream of this GPU's runtime, and returns without waiting for it: work queued after it
    /// on that stream reads the results; the host, after [`DeviceSums::wait`]. (A level's
    /// exchange and its split search then run with no host synchronisation between them.)
    ///
    /// # Safety
    /// Each address must hold `len` elements of the reduction's type on this worker's GPU,
    /// written by work queued on the stream of that GPU's runtime, and stay allocated until
    /// the stream has passed the exchange.
    unsafe fn queue_in_place(&self, buffers: &[DeviceReduction]) -> Result<()>;
    /// Waits, within the collective's deadline, until the GPU has done everything queued on
    /// the runtime's stream; a peer that fails or never takes part ends the wait with an
    /// error (the communicator aborted, so no queued exchange is left hanging). `what` says
    /// what the caller waits for.
    fn wait(&self, what: &str) -> Result<()>;
    /// Gathers each part `(send, receive)` from every worker, as one exchange: `bytes` bytes at
    /// `send` on each worker land at `receive + rank * bytes`, in rank order, on every worker;
    /// returns once they have.
    ///
    /// # Safety
    /// As [`DeviceSums::queue_in_place`]: each `send` holds `bytes` bytes and each `receive`
    /// `world * bytes`, on this worker's GPU, written by work on its runtime's stream.
    unsafe fn gather_in_place(&self, parts: &[(u64, u64)], bytes: usize) -> Result<()>;
}

/// One buffer of device memory reduced over the workers, in place ([`DeviceSums::queue_in_place`]).
#[derive(Clone, Copy, Debug)]
pub struct DeviceReduction {
    /// The buffer's device address.
    pub address: u64,
    /// Its elements.
    pub len: usize,
    pub op: DeviceOp,
}

/// An element type and a reduction of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceOp {
    /// Sums of `i64` (histograms, gradient totals: exact).
    SumI64,
    /// Sums of `u32` (row counts).
    SumU32,
    /// Maxima of `u32` (gradient magnitudes as float bits, flags).
    MaxU32,
}

/// The collective of one worker alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn world(&self) -> usize {
        1
    }

    fn all_reduce_sum(&self, _: &mut [i64]) -> Result<()> {
        Ok(())
    }

    fn all_reduce_max(&self, _: &mut [i64]) -> Result<()> {
        Ok(())
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(vec![mine.to_vec()])
    }

    fn broadcast(&self, mine: &[u8], _: usize) -> Result<Vec<u8>> {
        Ok(mine.to_vec())
    }
}

/// A collective's deadline from a number of seconds, which must be positive and finite (and
/// not so large that it cannot be a `Duration`).
pub fn timeout_from_secs(seconds: f64) -> Result<std::time::Duration> {
    let bad = || Error::param("timeout", format!("must be a positive number of seconds, not {seconds}"));
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(bad());
    }
    std::time::Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

/// Sums gradient sums (histograms, node totals) over the workers, in place.
pub fn sum_grads(comm: &dyn Collective, sums: &mut [GradSum]) -> Result<()> {
    if comm.world() == 1 {
        return Ok(());
    }
    // SAFETY: `GradSum` is `#[repr(C)]` with two `i64` fields and no padding, so a slice of n
    // of them is a slice of 2n `i64` with the same alignment; the view borrows `sums`
    // mutably for its whole life.
    let flat = unsafe { std::slice::from_raw_parts_mut(sums.as_mut_ptr().cast::<i64>(), sums.len() * 2) };
    comm.all_reduce_sum(flat)
}

/// The largest of each worker's non-negative, non-NaN floats (gradient magnitudes).
pub fn max_magnitudes(comm: &dyn Collective, values: &mut [f32]) -> Result<()> {
    if comm.world() == 1 {
        return Ok(());
    }
    // Non-negative floats order as their bit patterns do.
    let mut bits: Vec<i64> = values.iter().map(|v| v.to_bits() as i64).collect();
    comm.all_reduce_max(&mut bits)?;
    values.iter_mut().zip(bits).for_each(|(v, b)| *v = f32::from_bits(b as u32));
    Ok(())
}

/// The sum of one count over the workers.
pub fn sum_count(comm: &dyn Collective, count: u64) -> Result<u64> {
    let mut v = [count as i64];
    comm.all_reduce_sum(&mut v)?;
    Ok(v[0] as u64)
}

/// Packs a list of byte strings into one (length-prefixed), for one gather instead of many.
pub(crate) fn pack(items: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|i| i.len() + 8).sum());
    for i in items {
        out.extend_from_slice(&(i.len() as u64).to_le_bytes());
        out.extend_from_slice(i);
    }
    out
}

/// The byte strings [`pack`] joined; a malformed pack (a peer's bug) is an error.
pub(crate) fn unpack(mut bytes: &[u8]) -> Result<Vec<&[u8]>> {
    let bad = || Error::Collective("a worker sent a malformed message".into());
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = u64::from_le_bytes(bytes.get(..8).ok_or_else(bad)?.try_into().unwrap()) as usize;
        let item = bytes.get(8..8usize.checked_add(len).ok_or_else(bad)?).ok_or_else(bad)?;
        out.push(item);
        bytes = &bytes[8 + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_positive_finite_durations() {
        assert_eq!(timeout_from_secs(2.5).unwrap(), std::time::Duration::from_millis(2500));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e30] {
            assert!(timeout_from_secs(bad).unwrap_err().to_string().contains("positive number of seconds"), "{bad}");
        }
    }

    #[test]
    fn packs_round_trip() {
        let items: [&[u8]; 4] = [b"", b"abc", &[0u8; 300], b"z"];
        assert_eq!(unpack(&pack(&items)).unwrap(), items.to_vec());
        assert!(unpack(&[5, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }
}
