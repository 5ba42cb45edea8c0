//! The growth driver over two backends in lockstep (tests/common/lockstep.rs), on the CPU:
//! the harness that compares the GPU's steps with the CPU's (tests/cuda.rs) must find no
//! difference between two CPU learners, must name the step where two learners diverge, and the
//! driver must grow the tree `Learner::grow` grows.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use common::lockstep::{grow_in_lockstep, targets, Lockstep, Setup};
use polars_gbt::backend::Learner;
use polars_gbt::random::Rng;
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame};

/// Random regression data with missing values in one column.
fn data(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 5);
    let mut cols = vec![vec![0f32; n]; 5];
    for (j, col) in cols.iter_mut().enumerate() {
        for v in col.iter_mut() {
            *v = (rng.below(10_000) as f32) / 100.0 + j as f32;
            if j == 1 && rng.below(4) == 0 {
                *v = f32::NAN;
            }
        }
    }
    let y: Vec<f32> = (0..n)
        .map(|i| (cols[0][i] > 50.0) as u8 as f32 + 0.02 * cols[2][i] + (rng.below(100) as f32) / 500.0)
        .collect();
    let columns = cols
        .into_iter()
        .enumerate()
        .map(|(j, c)| FeatureColumn::new(format!("x{j}"), vec![Arc::new(Float32Array::from(c)) as ArrayRef]).unwrap())
        .collect();
    Dataset::new(FeatureFrame::new(columns).unwrap(), y).unwrap()
}

const CONFIGS: [&str; 3] = [
    r#"{"max_depth": 6}"#,
    r#"{"max_depth": 0, "grow_policy": "lossguide", "max_leaves": 20}"#,
    r#"{"max_depth": 5, "colsample_bylevel": 0.7, "colsample_bynode": 0.6, "seed": 3}"#,
];

#[test]
fn two_cpu_learners_agree_at_every_step_and_grow_the_learners_tree() {
    let d = data(5_000, 1);
    for json in CONFIGS {
        let setup = Setup::new(json, &d);
        let (mut a, mut b, mut reference) = (setup.cpu_learner(&d), setup.cpu_learner(&d), setup.cpu_learner(&d));
        let features: Vec<u32> = (0..5).collect();
        let (sa, qa, ta) = a.begin_tree(0, None).unwrap();
        let (sb, qb, tb) = b.begin_tree(0, None).unwrap();
        assert_eq!((qa, ta), (qb, tb));
        let mut both = Lockstep::new(sa, sb, &setup.cuts);
        let tree =
            grow_in_lockstep(&mut both, &setup, (qa, ta), &features, 7).unwrap_or_else(|d| panic!("{json}: {d}"));
        let (partitions, histograms, searches) = both.checked;
        assert!(tree.n_nodes() >= 9, "{json}: a tree of {} nodes", tree.n_nodes());
        // Every node that was evaluated had its rows, histogram and split compared.
        assert!(partitions > 4 && partitions == histograms && histograms == searches, "{json}: {:?}", both.checked);
        assert_eq!(reference.grow(0, None, features, 7).unwrap(), tree, "{json}: the learner grows another tree");
    }
}

#[test]
fn the_lockstep_names_the_step_that_diverged() {
    let d = data(5_000, 2);
    let setup = Setup::new(CONFIGS[0], &d);
    // One row's label moved: its gradient, so the root's histogram, differs (not the scales).
    let mut label = d.label().to_vec();
    let row = 1234;
    label[row] += 0.25;
    let moved = Dataset::new(d.features().clone(), label).unwrap();
    let mut a = setup.cpu_learner(&d);
    let mut b = setup.cpu_learner(&d);
    b.compute_gradients(&*setup.loss, &targets(&moved)).unwrap();
    let (sa, qa, ta) = a.begin_tree(0, None).unwrap();
    let (sb, qb, _) = b.begin_tree(0, None).unwrap();
    assert_eq!(qa, qb, "the moved label must keep the gradient scales");
    let mut both = Lockstep::new(sa, sb, &setup.cuts);
    let found = grow_in_lockstep(&mut both, &setup, (qa, ta), &(0..5).collect::<Vec<_>>(), 0).unwrap_err();
    assert!(found.starts_with("histogram: node 0 at depth 0, feature 0"), "{found}");
    assert_eq!(both.checked, (1, 0, 0), "only the root's rows were compared before the histogram");
}
