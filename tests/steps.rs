//! The growth driver over two backends in lockstep (tests/common/lockstep.rs), on the CPU:
//! the harness that compares the GPU's steps with the CPU's (tests/cuda_layouts.rs) must find no
//! difference between two CPU learners, must name the step where two learners diverge, and the
//! driver must grow the tree `Learner::grow` grows. Loss-guided growth in batches must grow
//! the strict order's tree.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array};
use common::distributed::{dataset, rows};
use common::lockstep::{grow_in_lockstep, targets, Lockstep, Setup};
use polars_gbt::backend::cpu::predict::leaf_binned;
use polars_gbt::backend::Learner;
use polars_gbt::data::BinnedMatrix;
use polars_gbt::error::Result;
use polars_gbt::random::Rng;
use polars_gbt::tree::grow::{grow_tree_in_batches, Expansion, GrowSteps, Open, TreeContext, LOSSGUIDE_BATCH};
use polars_gbt::tree::{GradSum, Tree};
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

/// A backend's steps, counting what the driver asks of them.
struct Counted<S> {
    steps: S,
    /// Calls to partition and build, nodes expanded by them, leaves merged back at the end.
    batches: usize,
    expanded: usize,
    merged: usize,
}

impl<S: GrowSteps> GrowSteps for Counted<S> {
    type Node = S::Node;

    fn build_root(&mut self, ctx: &TreeContext) -> Result<S::Node> {
        self.steps.build_root(ctx)
    }

    fn evaluate(&mut self, nodes: &mut [Open<S::Node>], ctx: &TreeContext) -> Result<()> {
        self.steps.evaluate(nodes, ctx)
    }

    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<S::Node>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[S::Node; 2]>>> {
        self.batches += 1;
        self.expanded += expansions.len();
        self.steps.partition_and_build(tree, expansions, ctx)
    }

    fn discard(&mut self, node: S::Node) {
        self.steps.discard(node)
    }

    fn renumber(&mut self, ids: &[u32], merged: &[u32]) -> Result<()> {
        self.merged += merged.len();
        self.steps.renumber(ids, merged)
    }

    fn histogram(&mut self, node: &S::Node) -> Result<Vec<GradSum>> {
        self.steps.histogram(node)
    }

    fn rows(&mut self, node: &S::Node) -> Result<Vec<u32>> {
        self.steps.rows(node)
    }
}

const LOSSGUIDE: [&str; 6] = [
    r#"{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 63}"#,
    r#"{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 255, "min_child_weight": 2}"#,
    r#"{"grow_policy": "lossguide", "max_depth": 5, "max_leaves": 20}"#,
    r#"{"grow_policy": "lossguide", "max_depth": 6, "max_leaves": 0}"#,
    r#"{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 40, "colsample_bynode": 0.5, "seed": 4}"#,
    r#"{"grow_policy": "lossguide", "max_depth": 0, "max_leaves": 31, "monotone_constraints": {"x0": 1}}"#,
];

#[test]
fn loss_guided_growth_in_batches_grows_the_strict_orders_tree_and_partition() {
    let mixed = rows(6_000, 9);
    let sets = [data(5_000, 3), dataset(&mixed, &(0..mixed.label.len()).collect::<Vec<_>>(), true)];
    let (mut strict_batches, mut batches, mut merged) = (0, 0, 0);
    for (k, d) in sets.iter().enumerate() {
        for json in LOSSGUIDE {
            let setup = Setup::new(json, d);
            let binned = BinnedMatrix::new(d.features(), &setup.cuts);
            let features: Vec<u32> = (0..d.features().n_features() as u32).collect();
            let mut strict: Option<Tree> = None;
            for batch in [1, 2, 7, LOSSGUIDE_BATCH] {
                let at = format!("data {k}, {json}, batches of {batch}");
                let mut learner = setup.cpu_learner(d);
                let (steps, quantiser, total) = learner.begin_tree(0, None).unwrap();
                let ctx =
                    TreeContext { params: &setup.grow, quantiser, tree_features: &features, seed: 5, outputs: &[] };
                let mut counted = Counted { steps, batches: 0, expanded: 0, merged: 0 };
                let tree = grow_tree_in_batches(&mut counted, &ctx, &setup.cuts, total, batch).unwrap();
                // Every leaf owns, in ascending order, the rows the tree routes to it.
                let mut routed = vec![Vec::new(); tree.n_nodes()];
                for r in 0..d.n_rows() {
                    routed[leaf_binned(&tree, &binned, r) as usize].push(r as u32);
                }
                for leaf in (0..tree.n_nodes() as u32).filter(|&n| tree.is_leaf(n)) {
                    let owned = counted.steps.partition.rows_of(leaf);
                    assert_eq!(owned, &routed[leaf as usize][..], "{at}: the rows of leaf {leaf}");
                }
                let splits = (tree.n_nodes() - 1) / 2;
                // Speculated splits the tree does not keep: merged back, or under one merged back.
                assert!(counted.expanded >= splits + counted.merged, "{at}: {} expansions", counted.expanded);
                match &strict {
                    None => {
                        assert_eq!((counted.batches, counted.merged), (splits, 0), "{at}: one leaf at a time");
                        assert!(splits >= 15, "{at}: a tree of {splits} splits");
                        strict_batches += counted.batches;
                        strict = Some(tree);
                    }
                    Some(want) => {
                        assert_eq!(&tree, want, "{at}: not the strict order's tree");
                        batches += if batch == LOSSGUIDE_BATCH { counted.batches } else { 0 };
                        merged += counted.merged;
                    }
                }
            }
        }
    }
    // The batches did batch, and some speculation was undone.
    assert!(batches * 4 <= strict_batches, "{batches} batches of {LOSSGUIDE_BATCH} against {strict_batches} strict");
    assert!(merged > 0, "no speculated split was ever merged back");
}
