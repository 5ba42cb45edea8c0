//! Parsed models shared by every batch of every query in this process: a stream of batches, or
//! a model column holding a few distinct models, parses each model and lays out its trees for
//! the CPU (or uploads them to the GPU) once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use polars::prelude::PolarsResult;

use super::to_polars;
use crate::backend::{Backend, Predictor};
use crate::Model;

/// A forest laid out for one backend, or why it could not be.
type Laid = std::result::Result<Arc<dyn Predictor + Send + Sync>, String>;

/// A parsed model with, once a batch asks for a backend, its forest laid out for it.
pub(super) struct CachedModel {
    pub(super) model: Arc<Model>,
    /// By [`Backend::index`].
    predictors: [OnceLock<Laid>; Backend::ALL.len()],
    /// The bytes, kept to compare when the key is only a checksum.
    bytes: Option<Vec<u8>>,
    size: usize,
}

/// The rounds `[start, end)` of a model that a prediction uses (`iteration_range`); None: all.
pub(super) type Rounds = Option<(usize, usize)>;

/// What finds a model's bytes in the cache, with the rounds used of it (each slice is an entry).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A digest the Python package computed once for a constant model (BLAKE2b, 128 bits). It
    /// is trusted, so that a batch does not checksum and compare megabytes again.
    Digest(String, Rounds),
    /// Length and CRC-32 of bytes met in a model column; entries are compared in full.
    Content(usize, u32, Rounds),
}

impl Key {
    fn rounds(&self) -> Rounds {
        match self {
            Key::Digest(_, r) | Key::Content(_, _, r) => *r,
        }
    }
}

impl CachedModel {
    /// The model's forest laid out for `backend`, on the first request for it (a failure is
    /// kept too, as its message: a batch after it fails alike without trying again).
    pub(super) fn predictor(&self, backend: Backend) -> Laid {
        self.predictors[backend.index()]
            .get_or_init(|| self.model.predictor(backend).map_err(|e| e.to_string()))
            .clone()
    }
}

/// Model bytes kept at most (their layouts take about as much again), and models at most.
const BUDGET_BYTES: usize = 512 << 20;
const MAX_MODELS: usize = 4096;

#[derive(Default)]
struct Cache {
    /// Each entry with the tick of its last use.
    entries: HashMap<Key, (Arc<CachedModel>, u64)>,
    tick: u64,
    bytes: usize,
}

impl Cache {
    fn get(&mut self, key: &Key, bytes: &[u8]) -> Option<Arc<CachedModel>> {
        self.tick += 1;
        let (entry, used) = self.entries.get_mut(key)?;
        if entry.bytes.as_deref().is_some_and(|b| b != bytes) {
            return None;
        }
        *used = self.tick;
        Some(entry.clone())
    }

    /// Adds an entry, first dropping the least recently used ones it does not fit beside.
    fn insert(&mut self, key: Key, entry: Arc<CachedModel>) {
        if let Some((old, _)) = self.entries.remove(&key) {
            self.bytes -= old.size;
        }
        while !self.entries.is_empty() && (self.bytes + entry.size > BUDGET_BYTES || self.entries.len() >= MAX_MODELS) {
            let oldest = self.entries.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone());
            if let Some((old, _)) = oldest.and_then(|k| self.entries.remove(&k)) {
                self.bytes -= old.size;
            }
        }
        self.tick += 1;
        self.bytes += entry.size;
        self.entries.insert(key, (entry, self.tick));
    }
}

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner())
}

/// The entry of `key`, parsed from `bytes` (and sliced to the key's rounds) when it is new.
fn lookup(key: Key, bytes: &[u8]) -> crate::Result<Arc<CachedModel>> {
    if let Some(entry) = cache().get(&key, bytes) {
        return Ok(entry);
    }
    // Parsed outside the lock: other batches go on meanwhile.
    let mut model = Model::from_bytes(bytes)?;
    if let Some((start, end)) = key.rounds() {
        model = model.slice(start, end, 1)?;
    }
    let entry = Arc::new(CachedModel {
        model: Arc::new(model),
        predictors: Default::default(),
        // Content keys are compared in full on every hit; digests are trusted.
        bytes: matches!(key, Key::Content(..)).then(|| bytes.to_vec()),
        size: bytes.len(),
    });
    cache().insert(key, entry.clone());
    Ok(entry)
}

/// A constant model of `gbt.predict` (its `rounds`), by the digest Python sent with its bytes.
pub(super) fn by_digest(digest: &str, bytes: &[u8], rounds: Rounds) -> PolarsResult<Arc<CachedModel>> {
    lookup(Key::Digest(digest.to_string(), rounds), bytes).map_err(to_polars)
}

/// A model met as bytes alone (a model column, or a caller without a digest), its `rounds`.
pub(super) fn by_content(bytes: &[u8], rounds: Rounds) -> crate::Result<Arc<CachedModel>> {
    lookup(Key::Content(bytes.len(), crc32fast::hash(bytes), rounds), bytes)
}
