//! Loaders for the shared test datasets in `../shared/data` (see its README.md).
//!
//! Every dataset is loaded exactly as `bench/reference_accuracy.py` loads it for XGBoost and
//! LightGBM, so that our metrics can be compared with the reference figures in
//! `docs/reference-accuracy.md`:
//!
//! * 1-based LibSVM (agaricus, rank.*): an index absent from a row is missing (NaN); the
//!   number of features is the largest index in the train file; column `j` holds index `j+1`.
//! * categorical.data (0-based LibSVM, 8 features): an absent index is the value 0; features
//!   0, 1, 4, 5 and 6 are categorical, named by their integer codes.
//! * Files without a train/test split (categorical, agaricus-lepiota, machine, dermatology):
//!   row `i` (0-based, file order) is in the test set iff `i % 5 == 0`.
//! * Categorical columns carry the categories of the whole file (train and test), as the
//!   reference's pandas categories do.
//!
//! Feature columns are named `f0`, `f1`, ... as in the reference script.

#![allow(dead_code)] // Each test binary uses only some of the loaders.

pub mod backends;
pub mod distributed;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod lockstep;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, Int32Array, StringArray};
use polars_gbt::objective::Targets;
use polars_gbt::{Dataset, FeatureColumn, FeatureFrame};

/// The shared data folder: `../shared/data` beside the checkout, as in CI.
pub fn data_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
    assert!(
        dir.is_dir(),
        "test data not found: looked for {} (the shared data folder must sit beside the checkout as ../shared/data)",
        dir.display()
    );
    dir
}

/// One side (train or test) of a dataset.
pub struct Part {
    pub frame: FeatureFrame,
    pub label: Vec<f32>,
    pub weight: Option<Vec<f32>>,
    /// Query group sizes, consecutive runs of rows in file order.
    pub group_sizes: Option<Vec<usize>>,
    /// Per-row starting margin (one output).
    pub base_margin: Option<Vec<f32>>,
}

impl Part {
    /// The part as training or evaluation data, with everything it carries.
    pub fn dataset(&self) -> Dataset {
        let mut d = Dataset::new(self.frame.clone(), self.label.clone()).expect("dataset");
        if let Some(w) = &self.weight {
            d = d.with_weight(w.clone()).expect("weights");
        }
        if let Some(g) = &self.group_sizes {
            d = d.with_group_sizes(g).expect("query groups");
        }
        if let Some(m) = &self.base_margin {
            d = d.with_base_margin(m.clone()).expect("base margin");
        }
        d
    }

    /// Query groups as offsets `[0, s0, s0 + s1, ...]`, as metrics take them.
    pub fn group_offsets(&self) -> Option<Vec<usize>> {
        self.group_sizes.as_ref().map(|sizes| {
            std::iter::once(0)
                .chain(sizes.iter().scan(0, |end, s| {
                    *end += s;
                    Some(*end)
                }))
                .collect()
        })
    }

    /// Label and weight for a metric; `groups` must come from [`Part::group_offsets`].
    pub fn targets<'a>(&'a self, groups: Option<&'a [usize]>) -> Targets<'a> {
        Targets { label: &self.label, label_upper: None, weight: self.weight.as_deref(), groups }
    }

    pub fn n_rows(&self) -> usize {
        self.label.len()
    }
}

/// A train/test pair.
pub struct Split {
    pub train: Part,
    pub test: Part,
}

/// A feature column before it becomes Arrow.
#[derive(Clone)]
enum Column {
    /// NaN is missing.
    Numeric(Vec<f32>),
    /// `codes[i]` indexes `levels`; None is missing.
    Categorical { codes: Vec<Option<i32>>, levels: Arc<Vec<String>> },
}

impl Column {
    /// A categorical column from string values, coded by the sorted distinct values;
    /// `missing` marks absent values.
    fn categorical(values: &[&str], missing: Option<&str>) -> Column {
        let mut levels: Vec<String> = values.iter().filter(|v| Some(**v) != missing).map(|v| v.to_string()).collect();
        levels.sort();
        levels.dedup();
        let codes =
            values.iter().map(|v| levels.binary_search_by(|l| l.as_str().cmp(v)).ok().map(|c| c as i32)).collect();
        Column::Categorical { codes, levels: Arc::new(levels) }
    }

    fn take(&self, rows: &[usize]) -> Column {
        match self {
            Column::Numeric(v) => Column::Numeric(rows.iter().map(|&r| v[r]).collect()),
            Column::Categorical { codes, levels } => {
                Column::Categorical { codes: rows.iter().map(|&r| codes[r]).collect(), levels: levels.clone() }
            }
        }
    }

    fn to_arrow(&self) -> ArrayRef {
        match self {
            Column::Numeric(v) => Arc::new(Float32Array::from(v.clone())),
            Column::Categorical { codes, levels } => {
                let values = StringArray::from_iter_values(levels.iter());
                let keys = Int32Array::from(codes.clone());
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(values)).expect("dictionary column"))
            }
        }
    }
}

/// A frame with columns named `f0`, `f1`, ...
fn frame(columns: &[Column]) -> FeatureFrame {
    let columns = columns
        .iter()
        .enumerate()
        .map(|(j, c)| FeatureColumn::new(format!("f{j}"), vec![c.to_arrow()]).expect("feature column"))
        .collect();
    FeatureFrame::new(columns).expect("feature frame")
}

/// A part without weights, groups or margins.
fn plain_part(columns: &[Column], label: Vec<f32>) -> Part {
    Part { frame: frame(columns), label, weight: None, group_sizes: None, base_margin: None }
}

/// Splits whole-file columns: row `i` is test iff `i % 5 == 0`.
fn mod5_split(columns: &[Column], label: &[f32]) -> Split {
    let (test, train): (Vec<usize>, Vec<usize>) = (0..label.len()).partition(|i| i % 5 == 0);
    let part = |rows: &[usize]| {
        let cols: Vec<Column> = columns.iter().map(|c| c.take(rows)).collect();
        plain_part(&cols, rows.iter().map(|&r| label[r]).collect())
    };
    Split { train: part(&train), test: part(&test) }
}

fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn parse_f32(s: &str, path: &Path) -> f32 {
    s.trim().parse().unwrap_or_else(|e| panic!("{}: `{s}` is not a number: {e}", path.display()))
}

/// One number per line (weights, init scores).
fn read_floats(path: &Path) -> Vec<f32> {
    read_text(path).lines().map(|l| parse_f32(l, path)).collect()
}

/// One integer per line (query group sizes).
fn read_sizes(path: &Path) -> Vec<usize> {
    read_text(path)
        .lines()
        .map(|l| l.trim().parse().unwrap_or_else(|e| panic!("{}: `{l}` is not a size: {e}", path.display())))
        .collect()
}

/// Tab-separated, no header, label first: (feature columns, label).
fn read_tsv(path: &Path) -> (Vec<Column>, Vec<f32>) {
    let rows: Vec<Vec<f32>> =
        read_text(path).lines().map(|l| l.split('\t').map(|s| parse_f32(s, path)).collect()).collect();
    let label = rows.iter().map(|r| r[0]).collect();
    let n_cols = rows[0].len();
    let columns = (1..n_cols).map(|j| Column::Numeric(rows.iter().map(|r| r[j]).collect())).collect();
    (columns, label)
}

/// LibSVM text as dense numeric columns: (columns, label). Indices absent from a row get
/// `absent`; `n_features` defaults to the largest index seen (after `one_based` shifting).
fn read_libsvm(path: &Path, one_based: bool, absent: f32, n_features: Option<usize>) -> (Vec<Vec<f32>>, Vec<f32>) {
    let text = read_text(path);
    let mut label = Vec::new();
    let mut entries: Vec<(usize, usize, f32)> = Vec::new();
    for (row, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        label.push(parse_f32(fields.next().expect("label"), path));
        for field in fields {
            let (idx, value) =
                field.split_once(':').unwrap_or_else(|| panic!("{}: bad entry `{field}`", path.display()));
            let idx: usize = idx.parse().unwrap_or_else(|e| panic!("{}: bad index `{idx}`: {e}", path.display()));
            let col = if one_based { idx.checked_sub(1).expect("index 0 in a 1-based file") } else { idx };
            entries.push((row, col, parse_f32(value, path)));
        }
    }
    let seen = entries.iter().map(|e| e.1 + 1).max().unwrap_or(0);
    let n_features = n_features.unwrap_or(seen);
    assert!(seen <= n_features, "{}: index {seen} beyond {n_features} features", path.display());
    let mut columns = vec![vec![absent; label.len()]; n_features];
    for (row, col, value) in entries {
        columns[col][row] = value;
    }
    (columns, label)
}

/// A 1-based LibSVM train/test pair; absent indices are missing.
fn libsvm_pair(train: &Path, test: &Path, expect_features: usize) -> Split {
    let (train_cols, train_label) = read_libsvm(train, true, f32::NAN, None);
    assert_eq!(train_cols.len(), expect_features, "{}: feature count", train.display());
    let (test_cols, test_label) = read_libsvm(test, true, f32::NAN, Some(train_cols.len()));
    let numeric = |cols: Vec<Vec<f32>>| cols.into_iter().map(Column::Numeric).collect::<Vec<_>>();
    Split { train: plain_part(&numeric(train_cols), train_label), test: plain_part(&numeric(test_cols), test_label) }
}

/// LightGBM binary_classification (Higgs rows) with sample weights on both sides.
pub fn binary() -> Split {
    let dir = data_dir().join("lightgbm/binary_classification");
    let part = |name: &str| {
        let (cols, label) = read_tsv(&dir.join(name));
        Part { weight: Some(read_floats(&dir.join(format!("{name}.weight")))), ..plain_part(&cols, label) }
    };
    Split { train: part("binary.train"), test: part("binary.test") }
}

/// LightGBM regression with the `.init` files as base margins on both sides.
pub fn regression() -> Split {
    let dir = data_dir().join("lightgbm/regression");
    let part = |name: &str| {
        let (cols, label) = read_tsv(&dir.join(name));
        Part { base_margin: Some(read_floats(&dir.join(format!("{name}.init")))), ..plain_part(&cols, label) }
    };
    Split { train: part("regression.train"), test: part("regression.test") }
}

/// LightGBM multiclass_classification: 5 classes, labels 0..4.
pub fn multiclass() -> Split {
    let dir = data_dir().join("lightgbm/multiclass_classification");
    let part = |name: &str| {
        let (cols, label) = read_tsv(&dir.join(name));
        plain_part(&cols, label)
    };
    Split { train: part("multiclass.train"), test: part("multiclass.test") }
}

/// LightGBM lambdarank sample: 300 sparse features, relevance 0..4, `.query` group sizes.
pub fn lambdarank() -> Split {
    let dir = data_dir().join("lightgbm/lambdarank");
    let mut split = libsvm_pair(&dir.join("rank.train"), &dir.join("rank.test"), 300);
    for (part, name) in [(&mut split.train, "rank.train.query"), (&mut split.test, "rank.test.query")] {
        let sizes = read_sizes(&dir.join(name));
        assert_eq!(sizes.iter().sum::<usize>(), part.n_rows(), "{name}: group sizes vs rows");
        part.group_sizes = Some(sizes);
    }
    split
}

/// Which features of categorical.data are categorical (as in LightGBM's test config).
pub const CATEGORICAL_DATA_CATEGORICAL: [usize; 5] = [0, 1, 4, 5, 6];

/// LightGBM categorical.data: 8 integer-coded features (absent = 0), features 0, 1, 4, 5, 6
/// categorical; split by `i % 5`.
pub fn categorical() -> Split {
    let (columns, label) = read_libsvm(&data_dir().join("lightgbm/categorical/categorical.data"), false, 0.0, Some(8));
    let columns: Vec<Column> = columns
        .into_iter()
        .enumerate()
        .map(|(j, values)| {
            if CATEGORICAL_DATA_CATEGORICAL.contains(&j) {
                let names: Vec<String> = values.iter().map(|v| format!("{}", *v as i64)).collect();
                Column::categorical(&names.iter().map(String::as_str).collect::<Vec<_>>(), None)
            } else {
                Column::Numeric(values)
            }
        })
        .collect();
    mod5_split(&columns, &label)
}

/// XGBoost agaricus (mushrooms one-hot): 126 indicator features, absent = missing.
pub fn agaricus() -> Split {
    let dir = data_dir().join("xgboost/agaricus");
    libsvm_pair(&dir.join("agaricus.txt.train"), &dir.join("agaricus.txt.test"), 126)
}

/// Comma-separated rows of a file, as string fields.
fn read_csv(path: &Path) -> Vec<Vec<String>> {
    read_text(path).lines().map(|l| l.split(',').map(str::to_string).collect()).collect()
}

/// Field `j` of every row.
fn field(rows: &[Vec<String>], j: usize) -> Vec<&str> {
    rows.iter().map(|r| r[j].as_str()).collect()
}

/// Raw UCI mushrooms: label `p` -> 1, `e` -> 0; 22 categorical letter columns, `?` missing.
pub fn agaricus_lepiota() -> Split {
    let rows = read_csv(&data_dir().join("xgboost/agaricus-lepiota/agaricus-lepiota.data"));
    let label = rows
        .iter()
        .map(|r| match r[0].as_str() {
            "p" => 1.0,
            "e" => 0.0,
            other => panic!("agaricus-lepiota: unknown class `{other}`"),
        })
        .collect::<Vec<f32>>();
    let columns: Vec<Column> = (1..23).map(|j| Column::categorical(&field(&rows, j), Some("?"))).collect();
    mod5_split(&columns, &label)
}

/// UCI Computer Hardware: vendor (categorical) and MYCT..CHMAX; label ln(PRP).
pub fn machine() -> Split {
    let path = data_dir().join("xgboost/machine/machine.data");
    let rows = read_csv(&path);
    let mut columns = vec![Column::categorical(&field(&rows, 0), None)];
    columns.extend((2..8).map(|j| Column::Numeric(field(&rows, j).iter().map(|s| parse_f32(s, &path)).collect())));
    // ln in f64, as the reference computes it, then rounded once.
    let label: Vec<f32> = field(&rows, 8).iter().map(|s| (s.trim().parse::<f64>().expect("PRP")).ln() as f32).collect();
    mod5_split(&columns, &label)
}

/// UCI Dermatology: 34 features (`?` missing, in age), label = class - 1 (0..5).
pub fn dermatology() -> Split {
    let path = data_dir().join("xgboost/dermatology/dermatology.data");
    let rows = read_csv(&path);
    let number = |s: &str| if s == "?" { f32::NAN } else { parse_f32(s, &path) };
    let columns: Vec<Column> =
        (0..34).map(|j| Column::Numeric(field(&rows, j).into_iter().map(number).collect())).collect();
    let label: Vec<f32> = field(&rows, 34).into_iter().map(|s| number(s) - 1.0).collect();
    mod5_split(&columns, &label)
}
