//! What the workers of a distributed fit agree on before the first tree: that their data
//! has one schema, and one set of categories per categorical feature (the sorted union of
//! every worker's, as one worker holding all rows would have). Cut points and the base
//! score are agreed where they are computed (`collective::cuts`, the booster), from gathered
//! samples and labels.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{pack, unpack, Shard};
use crate::data::{Dataset, FeatureFrame};
use crate::error::{Error, Result};

/// What must be alike on every worker: feature names and kinds, and which optional inputs
/// come with the label.
fn schema_of(data: &Dataset) -> String {
    let features: Vec<String> = data
        .features
        .columns()
        .iter()
        .map(|c| format!("{}:{}", c.name(), if c.is_categorical() { "categorical" } else { "numeric" }))
        .collect();
    format!(
        "features [{}], {} target(s){}{}{}{}",
        features.join(", "),
        data.n_targets,
        if data.weight.is_some() { ", weight" } else { "" },
        if data.group_offsets.is_some() { ", group" } else { "" },
        if data.base_margin.is_some() { ", base_margin" } else { "" },
        if data.label_upper.is_some() { ", label_upper_bound" } else { "" },
    )
}

/// Checks that every worker's data has the schema of rank 0's, naming the first that differs.
pub fn check_schema(shard: &Shard, data: &Dataset) -> Result<()> {
    if !shard.is_distributed() {
        return Ok(());
    }
    let schemas = shard.comm.all_gather(schema_of(data).as_bytes())?;
    let first = String::from_utf8_lossy(&schemas[0]);
    for (rank, s) in schemas.iter().enumerate().skip(1) {
        let s = String::from_utf8_lossy(s);
        if s != first {
            return Err(Error::data(format!("worker {rank}'s data has {s}, but worker 0's has {first}")));
        }
    }
    Ok(())
}

/// `data` with each categorical feature coded by the sorted union of every worker's
/// categories, so that a code means one category on every worker.
pub fn unify_categories(shard: &Shard, data: &Dataset) -> Result<Dataset> {
    let columns = data.features.columns();
    let categorical: Vec<usize> = (0..columns.len()).filter(|&i| columns[i].is_categorical()).collect();
    if categorical.is_empty() || !shard.is_distributed() {
        return Ok(data.clone());
    }
    // One gather for every column: per column, its names packed length-prefixed (a name may
    // hold any byte, so no separator would do).
    let mine: Vec<Vec<u8>> = categorical
        .iter()
        .map(|&i| {
            let names = columns[i].categories().expect("categorical columns have categories");
            pack(&names.iter().map(|s| s.as_bytes()).collect::<Vec<_>>())
        })
        .collect();
    let gathered = shard.comm.all_gather(&pack(&mine.iter().map(Vec::as_slice).collect::<Vec<_>>()))?;
    let mut unions: Vec<BTreeSet<String>> = vec![BTreeSet::new(); categorical.len()];
    for block in &gathered {
        let per_column = unpack(block)?;
        if per_column.len() != categorical.len() {
            return Err(Error::Collective("workers disagree on the categorical features".into()));
        }
        for (union, names) in unions.iter_mut().zip(per_column) {
            union.extend(unpack(names)?.into_iter().map(|n| String::from_utf8_lossy(n).into_owned()));
        }
    }
    let mut new_columns = columns.to_vec();
    for (&i, union) in categorical.iter().zip(unions) {
        let union = Arc::new(union.into_iter().collect::<Vec<_>>());
        new_columns[i] = columns[i].with_categories(&union)?;
    }
    Ok(Dataset { features: FeatureFrame::new(new_columns)?, ..data.clone() })
}
