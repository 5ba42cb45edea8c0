//! Pass 1 of a streamed fit: what does not depend on the rows' order but the cut points'
//! sample (issue 57), so no per-row vector: the sample, batch by batch, through the one
//! [`CutSketch`] every fit uses; each categorical column's categories; the row count and the
//! rows' digest. At its end, the stream's cut points ([`CutPoints`]), every worker's in a
//! distributed fit.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::progress::{Pass, PassProgress, Progress};
use super::row_digest::RowDigest;
use super::schema::{check_schema, empty_schema, schema_frame};
use super::share::{every_workers, BatchRows, StreamShare};
use super::source::{changed, Batch, BatchSource};
use super::StreamParams;
use crate::data::cuts::{CutSketch, FeatureCuts, MAX_CATEGORIES};
use crate::data::frame::FeatureFrame;
use crate::error::{Error, Result};

/// What pass 1 gathers, batch by batch.
pub(super) struct FirstPass<'p> {
    p: &'p StreamParams,
    /// This worker's rows (all rows, on one worker).
    n_local: usize,
    share: Option<&'p StreamShare<'p>>,
    /// The first batch's features, its columns telling the schema every batch must have.
    schema: Option<FeatureFrame>,
    sketch: Option<CutSketch>,
    /// Each categorical feature's categories so far (None for numeric features).
    categories: Vec<Option<BTreeSet<String>>>,
    /// The rows so far, and their per-row inputs' digest, which pass 2's must equal.
    digest: RowDigest,
}

/// What pass 2 bins with: the features' schema with the whole stream's categories (each
/// categorical column's sorted names, which code it), the cut points, and the rows' digest
/// that pass 2's must equal.
pub(super) struct CutPoints {
    pub schema: FeatureFrame,
    pub categories: Vec<Option<Arc<Vec<String>>>>,
    pub cuts: Vec<FeatureCuts>,
    pub digest: RowDigest,
}

impl<'p> FirstPass<'p> {
    /// Pass 1 over `source`, whose `n_local` rows are this worker's (placed among all rows by
    /// `share`), telling `progress` after every batch.
    pub(super) fn read(
        source: &mut dyn BatchSource,
        p: &'p StreamParams,
        n_local: usize,
        share: Option<&'p StreamShare<'p>>,
        progress: &mut Progress,
    ) -> Result<Self> {
        let total = Some(n_local);
        let mut first = FirstPass::new(p, n_local, share);
        source.pass(&mut |b| {
            first.add(b)?;
            progress(&PassProgress { pass: Pass::CutPoints, rows: first.digest.rows, total, done: false });
            Ok(())
        })?;
        progress(&PassProgress { pass: Pass::CutPoints, rows: first.digest.rows, total, done: true });
        Ok(first)
    }

    fn new(p: &'p StreamParams, n_local: usize, share: Option<&'p StreamShare<'p>>) -> Self {
        let (schema, sketch, categories, digest) = (None, None, Vec::new(), RowDigest::default());
        FirstPass { p, n_local, share, schema, sketch, categories, digest }
    }

    fn add(&mut self, b: Batch) -> Result<()> {
        let n = b.data.n_rows();
        if n == 0 {
            return Ok(());
        }
        let features = b.data.features();
        match &self.schema {
            None => self.begin(&b)?,
            Some(schema) => check_schema(schema, features, self.digest.rows)?,
        }
        for (set, col) in self.categories.iter_mut().zip(features.columns()) {
            if let (Some(set), Some(names)) = (set, col.categories()) {
                set.extend(names.iter().cloned());
            }
        }
        let frame = match self.p.missing {
            Some(m) => features.with_missing_value(m),
            None => features.clone(),
        };
        // The sample is weighted as a collected fit's: positives' weights times scale_pos_weight.
        let scaled = (self.p.scale_pos_weight != 1.0).then(|| b.data.with_positive_weight(self.p.scale_pos_weight));
        let weights = match &scaled {
            Some(d) => d.weight(),
            None => b.data.weight(),
        };
        // A batch past the rows expected is an error before its rows are placed.
        let at = self.digest.rows;
        if at + n > self.n_local {
            return Err(changed("pass 1", at + n, self.n_local));
        }
        let global = match self.share {
            Some(share) => share.global_rows(at, n),
            None => BatchRows::From(at as u64),
        };
        self.sketch.as_mut().expect("made with the schema").add(&frame, weights, global.global());
        self.digest.add(&b);
        Ok(())
    }

    /// The first batch, `b`, sets what every batch must have: the schema (only the columns'
    /// kinds are kept: no rows of the first batch stay alive), the sketch of the cut points'
    /// sample, and which features gather categories.
    fn begin(&mut self, b: &Batch) -> Result<()> {
        let features = b.data.features();
        self.schema = Some(empty_schema(features)?);
        let n_global = self.share.map_or(self.n_local, |s| s.n_global);
        let mut sketch = CutSketch::new(features, self.p.seed, n_global)?;
        // A tenth more than this worker's share of the expected sample (its spread is
        // about its square root), weights only where rows have weights of their own.
        let expected = CutSketch::expected_rows(n_global) * self.n_local / n_global;
        let weighted = b.data.weight().is_some() || self.p.scale_pos_weight != 1.0;
        sketch.reserve(expected + expected / 10 + 1024, weighted);
        self.sketch = Some(sketch);
        self.categories = features.columns().iter().map(|c| c.is_categorical().then(BTreeSet::new)).collect();
        Ok(())
    }

    /// The stream's cut points from what the pass gathered (merged with every other worker's
    /// in a distributed fit), once it read the rows it expected.
    pub(super) fn cut_points(self) -> Result<CutPoints> {
        let FirstPass { p, n_local, share, schema, sketch, categories, digest } = self;
        let (Some(schema), Some(sketch)) = (schema, sketch) else {
            // The count (or the source) said there were rows: a stream read up already.
            return Err(changed("pass 1", 0, n_local));
        };
        if digest.rows != n_local {
            return Err(changed("pass 1", digest.rows, n_local));
        }
        let (sketch, categories) = match share {
            None => (sketch, categories),
            Some(share) => every_workers(share, &schema, p.seed, sketch, categories)?,
        };
        let categories: Vec<Option<Arc<Vec<String>>>> =
            categories.into_iter().map(|c| c.map(|set| Arc::new(set.into_iter().collect()))).collect();
        let cuts = with_categories(sketch.cuts(p.max_bin)?, &categories, &schema)?;
        let schema = schema_frame(&schema, &categories)?;
        Ok(CutPoints { schema, categories, cuts, digest })
    }
}

/// `cuts` with each categorical feature's bins its categories, one a category.
fn with_categories(
    mut cuts: Vec<FeatureCuts>,
    categories: &[Option<Arc<Vec<String>>>],
    schema: &FeatureFrame,
) -> Result<Vec<FeatureCuts>> {
    for ((cut, names), col) in cuts.iter_mut().zip(categories).zip(schema.columns()) {
        if let Some(names) = names {
            if names.len() > MAX_CATEGORIES {
                return Err(Error::column(
                    col.name(),
                    format!("has {} categories; at most {MAX_CATEGORIES} are supported", names.len()),
                ));
            }
            *cut = FeatureCuts::Categorical { n_categories: names.len() as u32 };
        }
    }
    Ok(cuts)
}
