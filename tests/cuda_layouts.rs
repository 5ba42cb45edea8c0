//! The shapes of data the GPU lays out its own way against the CPU oracle: categorical columns
//! (up to 100,000 categories), mostly-null data stored as compressed rows, row-major bins,
//! nodes of hundreds of partition blocks, and wide data binned a batch of features at a time
//! grow the CPU's trees; and the GPU's steps (partition, histograms, split search) equal the
//! CPU's one by one, grown in lockstep. These tests need a GPU (`scripts/gpu-build.sh` builds
//! them as `.gpu/cuda_layouts_tests` to run on one: docs/benchmarks.md); without one they skip
//! (the layout planning check runs everywhere).
#![cfg(feature = "cuda")]

mod common;

use common::gpu::{
    assert_gpu_predicts_as_cpu, assert_same_trees, categorical_data, column, dictionary, fit, gpu, random_data,
    sparse_data, sparse_data_of,
};
use polars_gbt::backend::cuda;
use polars_gbt::backend::StartMargin;
use polars_gbt::collective::Solo;
use polars_gbt::random::Rng;
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame};

#[test]
fn categorical_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = categorical_data(30_000, 6);
    for json in [
        r#"{"n_estimators": 8, "max_depth": 6}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "max_cat_to_onehot": 64}"#,
        r#"{"n_estimators": 6, "max_depth": 5, "max_cat_threshold": 4, "colsample_bynode": 0.7}"#,
        r#"{"n_estimators": 6, "grow_policy": "lossguide", "max_leaves": 20, "max_depth": 0}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
}

/// Two high-cardinality categorical columns: `k` categories of skewed frequency (many rare,
/// so `cat_smooth` leaves some out of the order) and 3,000 with nulls, whose orders are
/// longer than the search's shared-memory chunk; plus a numeric column.
fn wide_categorical_data(n: usize, k: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed, 9);
    let skewed = |rng: &mut Rng, k: usize| (rng.below(k) * rng.below(k) / k) as i32;
    let wide: Vec<Option<i32>> = (0..n).map(|_| Some(skewed(&mut rng, k))).collect();
    let mid: Vec<Option<i32>> = (0..n).map(|_| (rng.below(10) != 0).then(|| rng.below(3_000) as i32)).collect();
    let x: Vec<f32> = (0..n).map(|_| rng.below(1000) as f32 / 100.0).collect();
    let effect = |c: i32, salt: i32| ((c.wrapping_mul(2_654_435_761u32 as i32) ^ salt) % 7) as f32 / 3.0 - 1.0;
    let y: Vec<f32> = (0..n)
        .map(|i| {
            effect(wide[i].unwrap(), 11)
                + mid[i].map_or(0.8, |c| effect(c, 5))
                + 0.1 * x[i]
                + (rng.below(100) as f32 - 50.0) / 100.0
        })
        .collect();
    let dict = |keys: Vec<Option<i32>>, k: usize| dictionary(keys, (0..k).map(|c| format!("v{c}")).collect());
    let frame = FeatureFrame::new(vec![
        FeatureColumn::new("wide", vec![dict(wide, k)]).unwrap(),
        FeatureColumn::new("mid", vec![dict(mid, 3_000)]).unwrap(),
        column("x", x),
    ])
    .unwrap();
    Dataset::new(frame, y).unwrap()
}

#[test]
fn high_cardinality_categorical_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = wide_categorical_data(400_000, 60_000, 12);
    for json in [
        r#"{"n_estimators": 4, "max_depth": 6}"#,
        r#"{"n_estimators": 4, "max_depth": 6, "cat_smooth": 10, "cat_l2": 10, "min_data_per_group": 100}"#,
        r#"{"n_estimators": 4, "max_depth": 5, "max_cat_threshold": 16, "reg_alpha": 1, "max_delta_step": 0.7}"#,
        r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0, "subsample": 0.6}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    // 100,000 categories: past 16-bit bins, the device stores every bin in 32 bits.
    let data = wide_categorical_data(400_000, 100_000, 13);
    for json in [
        r#"{"n_estimators": 4, "max_depth": 6}"#,
        r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0, "max_cat_threshold": 5000}"#,
    ] {
        let (cpu, gpu) = (fit(json, &data, "cpu"), fit(json, &data, "cuda"));
        assert_same_trees(&cpu, &gpu, json);
        assert_gpu_predicts_as_cpu(&gpu, data.features(), json);
    }
}

/// Mostly-null data too wide for one histogram block's shared memory: `nf` features of up
/// to 255 bins (2 KB of shared sums each a node), so the histograms run in several feature
/// groups and each group reads only its part of a compressed row. Up to 255 features keep
/// every histogram slot below 2^16 (16-bit entries); more take 32-bit entries.
fn wide_sparse_data(n: usize, nf: usize, seed: u64) -> Dataset {
    sparse_data_of(n, nf, 100_000, seed)
}

/// The layout a GPU fit plans for `frame`, each row's present values counted here as the
/// device counts them (`count_present`).
fn planned(frame: &FeatureFrame, cuts: &[polars_gbt::data::FeatureCuts]) -> polars_gbt::backend::cuda::data::Layout {
    use polars_gbt::backend::cuda::data::DeviceMatrix;
    let present = DeviceMatrix::may_compress(frame).then(|| {
        let mut present = vec![0u32; frame.n_rows()];
        for col in frame.columns() {
            col.for_each_present(0, frame.n_rows(), |row, _| present[row] += 1);
        }
        present
    });
    DeviceMatrix::plan(frame, cuts, present.as_deref())
}

#[test]
fn mostly_null_data_is_stored_as_compressed_rows() {
    use polars_gbt::backend::cuda::data::Layout;
    use polars_gbt::data::cuts::compute_cuts;
    let sparse = sparse_data(5_000, 1);
    let cuts = compute_cuts(sparse.features(), None, 256, 0).unwrap();
    match planned(sparse.features(), &cuts) {
        Layout::Sparse(rows) => {
            // 100 features of 50 values: 16-bit entries, eight a word.
            assert_eq!(rows.entry_bytes, 2);
            assert!((8..=24).contains(&rows.longest_row()), "longest row {}", rows.longest_row());
            assert_eq!(rows.row_words.len(), 5_001);
        }
        other => panic!("expected compressed rows, got {other:?}"),
    }
    for (nf, entry_bytes) in [(250, 2), (300, 4)] {
        let wide = wide_sparse_data(20_000, nf, 1);
        let cuts = compute_cuts(wide.features(), None, 256, 0).unwrap();
        let slots: u32 = cuts.iter().map(|c| c.n_bins() + 1).sum();
        assert!(slots * 8 > 256 << 10, "{slots} histogram slots fit one block's shared memory");
        match planned(wide.features(), &cuts) {
            Layout::Sparse(rows) => assert_eq!(rows.entry_bytes, entry_bytes, "{nf} features, {slots} slots"),
            other => panic!("expected compressed rows, got {other:?}"),
        }
    }
    let (frame, y) = random_data(1_000, 6, 1);
    let dense = Dataset::new(frame, y).unwrap();
    let cuts = compute_cuts(dense.features(), None, 256, 0).unwrap();
    assert_eq!(planned(dense.features(), &cuts), Layout::Dense { width: 1, stride: 8 });
}

/// The partition's blocks learn their place in a node from the blocks before it, 32 at a time:
/// nodes of hundreds of blocks (4,096 rows each) take several windows, and trees that are
/// the CPU's show every row reached its child. Dense bins (column-major copy), row-major
/// bins (too many features for the copy) and compressed rows, depth-wise and loss-guided.
#[test]
fn levels_of_hundreds_of_partition_blocks_fit_the_cpus_trees() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(1_100_000, 5, 31);
    let dense = Dataset::new(frame, y).unwrap();
    let (frame, y) = random_data(300_000, 300, 32);
    let wide = Dataset::new(frame, y).unwrap();
    let sparse = sparse_data(600_000, 33);
    for (data, what) in [(&dense, "dense"), (&wide, "row-major"), (&sparse, "compressed rows")] {
        for json in [
            r#"{"n_estimators": 4, "max_depth": 7}"#,
            r#"{"n_estimators": 3, "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0}"#,
        ] {
            assert_same_trees(&fit(json, data, "cpu"), &fit(json, data, "cuda"), &format!("{what}: {json}"));
        }
    }
}

#[test]
fn sparse_gpu_trees_equal_cpu_trees() {
    if !gpu() {
        return;
    }
    let data = sparse_data(40_000, 2);
    for json in [
        r#"{"n_estimators": 8, "max_depth": 6}"#,
        r#"{"n_estimators": 5, "grow_policy": "lossguide", "max_leaves": 16, "max_depth": 0, "colsample_bynode": 0.5}"#,
    ] {
        assert_same_trees(&fit(json, &data, "cpu"), &fit(json, &data, "cuda"), json);
    }
    let json = r#"{"n_estimators": 6, "max_depth": 7}"#;
    for nf in [250, 300] {
        let wide = wide_sparse_data(30_000, nf, 4);
        assert_same_trees(&fit(json, &wide, "cpu"), &fit(json, &wide, "cuda"), &format!("{nf} mostly-null features"));
    }
    // Mostly-null categorical columns among them (30 and 3,000 categories, 4% present), and
    // objectives that walk the compressed rows for more than the margins: leaf refits (each
    // row's leaf) and several outputs.
    let mut rng = Rng::new(6, 1);
    let n = 40_000;
    let mut columns = data.features().columns().to_vec();
    for (name, k) in [("c30", 30usize), ("c3000", 3000)] {
        let keys = (0..n).map(|_| (rng.below(100) < 4).then(|| rng.below(k) as i32)).collect();
        let values = (0..k).map(|c| format!("{name}_{c}")).collect();
        columns.push(FeatureColumn::new(name, vec![dictionary(keys, values)]).unwrap());
    }
    let frame = FeatureFrame::new(columns).unwrap();
    let cuts = polars_gbt::data::cuts::compute_cuts(&frame, None, 256, 0).unwrap();
    use polars_gbt::backend::cuda::data::Layout;
    assert!(matches!(planned(&frame, &cuts), Layout::Sparse(_)), "the mixed frame is compressed rows");
    let y: Vec<f32> = data.label().to_vec();
    let classes: Vec<f32> = y.iter().map(|v| (v.abs() as u32 % 3) as f32).collect();
    for (json, labels) in [
        (r#"{"n_estimators": 6, "max_depth": 6}"#, &y),
        (r#"{"objective": "reg:absoluteerror", "n_estimators": 5, "max_depth": 6}"#, &y),
        (r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 4, "max_depth": 5}"#, &classes),
    ] {
        let mixed = Dataset::new(frame.clone(), labels.clone()).unwrap();
        assert_same_trees(
            &fit(json, &mixed, "cpu"),
            &fit(json, &mixed, "cuda"),
            &format!("mostly-null categoricals {json}"),
        );
    }
}

/// Wide dense data (more features than a batch of columns on the device, 256) is binned a
/// batch of features at a time, each batch's cut points computed on the device: the CPU's
/// trees, with and without sample weights (which weigh the cut points' sample).
#[test]
fn wide_fits_bin_their_columns_in_batches_as_the_cpu_bins_them() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(30_000, 600, 41);
    let weights: Vec<f32> = (0..y.len()).map(|i| 0.5 + (i % 7) as f32 * 0.25).collect();
    let json = r#"{"n_estimators": 5, "max_depth": 6, "objective": "reg:squarederror"}"#;
    let plain = Dataset::new(frame.clone(), y.clone()).unwrap();
    assert_same_trees(&fit(json, &plain, "cpu"), &fit(json, &plain, "cuda"), "600 features");
    let weighted = Dataset::new(frame, y).unwrap().with_weight(weights).unwrap();
    assert_same_trees(&fit(json, &weighted, "cpu"), &fit(json, &weighted, "cuda"), "600 features, weighted");
}

/// Grows one tree of `json` on `data` with the GPU's steps and the CPU's in lockstep, `repeats`
/// times: every partition (a node's rows), histogram and split search of the GPU, and the
/// tree's gradient scales and root sum, equal the CPU's, on every rebuild.
fn assert_steps_equal_cpu(json: &str, data: &Dataset, rows: Option<&[u32]>, features: &[u32], repeats: usize) {
    use common::lockstep::{grow_in_lockstep, Lockstep, Setup};
    use polars_gbt::backend::Learner;
    let setup = Setup::new(json, data);
    let mut cpu = setup.cpu_learner(data);
    let rt = cuda::runtime().unwrap();
    let _turn = rt.take_turn(true);
    let mut gpu = cuda::GpuLearner::new(
        &rt,
        data,
        &setup.cuts,
        setup.grow.clone(),
        &setup.cfg,
        &StartMargin::Rows(setup.margin.clone()),
        None,
        &Solo,
    )
    .unwrap_or_else(|e| panic!("{json}: {e}"));
    gpu.compute_gradients(&*setup.loss, &common::lockstep::targets(data)).unwrap();
    let mut first = None;
    for repeat in 0..repeats {
        // The CPU quantises a round's gradients in place: each rebuild starts from fresh ones.
        cpu.compute_gradients(&*setup.loss, &common::lockstep::targets(data)).unwrap();
        let (steps, q, total) = cpu.begin_tree(0, rows).unwrap();
        let started = gpu.begin_tree(0, rows).unwrap();
        assert_eq!((q, total), started, "{json}, rebuild {repeat}: gradient scales or the root's sum");
        let mut both = Lockstep::new(steps, &mut gpu, &setup.cuts);
        let tree = grow_in_lockstep(&mut both, &setup, started, features, 11)
            .unwrap_or_else(|d| panic!("{json}, rebuild {repeat}: GPU and CPU steps differ: {d}"));
        assert!(both.checked.2 >= 3, "{json}: only {:?} steps compared", both.checked);
        assert_eq!(first.get_or_insert_with(|| tree.clone()), &tree, "{json}: rebuild {repeat} grew another tree");
    }
}

#[test]
fn gpu_partition_histograms_and_split_search_equal_the_cpus_step_by_step() {
    if !gpu() {
        return;
    }
    let (frame, y) = random_data(50_000, 9, 7);
    let dense = Dataset::new(frame, y).unwrap();
    let all: Vec<u32> = (0..9).collect();
    // Each component 16 times over (the determinism check), then the other shapes once or twice.
    assert_steps_equal_cpu(r#"{"max_depth": 7}"#, &dense, None, &all, 16);
    assert_steps_equal_cpu(r#"{"max_depth": 6, "max_bin": 1024}"#, &dense, None, &all, 2);
    assert_steps_equal_cpu(r#"{"max_depth": 0, "grow_policy": "lossguide", "max_leaves": 40}"#, &dense, None, &all, 2);
    let sampled: Vec<u32> = (0..50_000).filter(|r| r % 3 != 1).collect();
    assert_steps_equal_cpu(
        r#"{"max_depth": 6, "colsample_bylevel": 0.8, "colsample_bynode": 0.6, "seed": 4}"#,
        &dense,
        Some(&sampled),
        &[0, 1, 3, 4, 6, 8],
        2,
    );
    assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &categorical_data(30_000, 8), None, &[0, 1, 2], 2);
    let sparse = sparse_data(40_000, 3);
    assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &sparse, None, &(0..100).collect::<Vec<_>>(), 2);
    for nf in [250, 300] {
        let wide = wide_sparse_data(30_000, nf, 5);
        assert_steps_equal_cpu(r#"{"max_depth": 6}"#, &wide, None, &(0..nf as u32).collect::<Vec<_>>(), 1);
    }
}
