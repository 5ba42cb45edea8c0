//! A fit over several devices of this process (`n_gpus`): each device trains its own share
//! of the rows as one worker of a distributed fit, so the trees are one device's.

use crate::backend::Engine;
use crate::collective::{even_ranges, Collective, RowSpans, Shard};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::Model;

use super::{fit, Job, RoundCallback, RoundLog, UserFunctions};

/// A fit over `cfg.n_gpus` devices of this process: the rows (and each evaluation set's) are
/// cut into contiguous shards, one per device, and each device runs this fit on its shard as
/// one worker of a distributed fit over the collective its engine gives (NCCL between GPUs),
/// so the trees are one device's. Device 0 calls `callback` and tells the others whether to go
/// on; its model is the fit's.
pub(super) fn fit_on_devices(engine: &dyn Engine, job: Job) -> Result<Model> {
    let Job { cfg, data, evals, user, callback, .. } = job;
    if user.objective.is_some() || !user.metrics.is_empty() {
        return Err(Error::param("n_gpus", "a fit over several GPUs cannot call a user's objective or metrics yet"));
    }
    let k = cfg.n_gpus;
    let n = data.n_rows();
    let ranges = even_ranges(n, k, data.group_offsets.as_deref(), false)?;
    let eval_ranges = evals
        .iter()
        .map(|(_, d)| even_ranges(d.n_rows(), k, d.group_offsets.as_deref(), true))
        .collect::<Result<Vec<_>>>()?;
    let callback = std::sync::Mutex::new(Some(callback));
    let lead_model = std::sync::Mutex::new(None);
    engine.on_each_device(k, &|rank, comm| {
        let (start, len) = ranges[rank];
        let part = data.row_range(start, len)?;
        let eval_parts = evals
            .iter()
            .zip(&eval_ranges)
            .map(|((_, d), r)| d.row_range(r[rank].0, r[rank].1))
            .collect::<Result<Vec<_>>>()?;
        let eval_refs: Vec<(&str, &Dataset)> = evals.iter().zip(&eval_parts).map(|((name, _), d)| (*name, d)).collect();
        let span = |(start, len): (usize, usize), n: usize| RowSpans::new(vec![(start as u64, len as u64)], n as u64);
        let shard = Shard {
            comm,
            rows: span(ranges[rank], n)?,
            evals: evals
                .iter()
                .zip(&eval_ranges)
                .map(|((_, d), r)| span(r[rank], d.n_rows()))
                .collect::<Result<_>>()?,
        };
        // Device 0 asks the caller's callback; the others follow its decision.
        let mut user_callback = match rank {
            0 => Some(callback.lock().unwrap_or_else(|p| p.into_inner()).take().expect("one GPU 0")),
            _ => None,
        };
        let mut decide = |log: &RoundLog| agree_to_go_on(comm, user_callback.as_deref_mut(), log);
        let user = UserFunctions::default();
        let model = fit(Job { cfg, data: &part, evals: &eval_refs, user, callback: &mut decide, shard: &shard })?;
        if rank == 0 {
            *lead_model.lock().unwrap_or_else(|p| p.into_inner()) = Some(model);
        }
        Ok(())
    })?;
    let model = lead_model.into_inner().unwrap_or_else(|p| p.into_inner());
    model.ok_or_else(|| Error::Device("the fit over several devices ended without device 0's model".into()))
}

/// Whether every device goes on after this round: device 0 (the one given `user`, the
/// caller's callback) decides, and one exchange a round tells the others.
fn agree_to_go_on(comm: &dyn Collective, user: Option<&mut RoundCallback>, log: &RoundLog) -> Result<bool> {
    const STOP: u8 = 0;
    const GO_ON: u8 = 1;
    const FAILED: u8 = 2;
    match user {
        Some(user) => {
            let decision = user(log);
            let code = match decision {
                Ok(true) => GO_ON,
                Ok(false) => STOP,
                Err(_) => FAILED,
            };
            // The others add 0, so the maximum is this code.
            comm.all_reduce_max(&mut [code as i64])?;
            decision
        }
        None => {
            let mut code = [0i64];
            comm.all_reduce_max(&mut code)?;
            match code[0] as u8 {
                GO_ON => Ok(true),
                STOP => Ok(false),
                _ => Err(Error::Collective("stopped: GPU 0's round callback ended the fit with an error".into())),
            }
        }
    }
}
