//! One test body for every backend (candle's `test_device!`, memchr's `Runner`): the CPU
//! scenarios of `invariants.rs`, `objectives.rs` and `constraints.rs` train through
//! [`train`], which fits on the CPU, the oracle, and then on every other backend this machine
//! can run (`Backend::ALL`: the GPU where one is usable), each of whose models must hold the
//! CPU's trees, byte for byte. The scenario then asserts its own properties on the CPU's model.
//!
//! Without a GPU (CI), only the CPU runs; on the GPU machine, `POLARS_GBT_REQUIRE_GPU=1` turns
//! an unusable GPU into a failure, so that a broken runtime cannot pass as a skipped backend.

use polars_gbt::backend::Backend;
use polars_gbt::{Dataset, Device, Model, Result, TrainConfig};

/// The backends besides the CPU that can train `cfg` here.
pub fn other_backends(cfg: &TrainConfig) -> Vec<Backend> {
    Backend::ALL
        .into_iter()
        .filter(|&b| b != Backend::Cpu)
        .filter(|&b| match b.engine().availability() {
            Ok(()) => true,
            Err(why) => {
                assert!(std::env::var_os("POLARS_GBT_REQUIRE_GPU").is_none(), "{b:?} is required here: {why}");
                false
            }
        })
        // A configuration one backend cannot train (e.g. max_bin past the GPU's limit) is
        // that backend's clear error, tested where it is met: here it is the CPU's alone.
        .filter(|&b| b.engine().unsupported(cfg).is_none())
        .collect()
}

fn device(b: Backend) -> Device {
    match b {
        Backend::Cpu => Device::Cpu,
        Backend::Cuda => Device::Cuda,
    }
}

/// `polars_gbt::train` on the CPU, checked on every other backend: each must fail where the
/// CPU fails and otherwise grow the CPU's trees from the CPU's base margin, and log the
/// CPU's evaluation results. Returns the CPU's result.
pub fn train(cfg: &TrainConfig, data: &Dataset, evals: &[(&str, &Dataset)]) -> Result<Model> {
    let oracle = polars_gbt::train(&TrainConfig { device: Device::Cpu, ..cfg.clone() }, data, evals);
    for backend in other_backends(cfg) {
        let other = polars_gbt::train(&TrainConfig { device: device(backend), ..cfg.clone() }, data, evals);
        match (&oracle, other) {
            (Ok(cpu), Ok(model)) => {
                assert_eq!(model.trees().len(), cpu.trees().len(), "{backend:?}: tree count");
                for (i, (a, b)) in cpu.trees().iter().zip(model.trees()).enumerate() {
                    assert_eq!(a, b, "{backend:?}: tree {i} differs from the CPU's");
                }
                assert_eq!(model.base_margin(), cpu.base_margin(), "{backend:?}: base margin");
                assert_eq!(model.best_iteration(), cpu.best_iteration(), "{backend:?}: best iteration");
                assert_eq!(model.evals_result(), cpu.evals_result(), "{backend:?}: evaluation log");
            }
            (Err(_), Err(_)) => {}
            (Ok(_), Err(e)) => panic!("{backend:?} failed where the CPU trained: {e}"),
            (Err(e), Ok(_)) => panic!("{backend:?} trained where the CPU failed with: {e}"),
        }
    }
    oracle
}
