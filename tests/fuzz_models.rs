//! A bounded mutation fuzzer over the model decoders (ours in binary and JSON, XGBoost JSON
//! and UBJSON, LightGBM text): model files are
//! untrusted input, so no byte string may make decoding or prediction panic, allocate what a
//! header merely claims, or predict non-finite values. Seeds are trained models of every
//! kind; mutations flip bits, overwrite integers with extreme values, truncate, extend and
//! splice, then (for the binary form) fix the header's length and checksum so the decoder
//! itself is reached. Each test runs `POLARS_GBT_FUZZ_ITERS` inputs (default 2,000: a few
//! seconds); docs/reliability.md reports longer runs. Inputs that ever crashed are kept in
//! tests/fuzz/crashers/ and replayed by `saved_crashers_stay_fixed`; the foreign seeds (models
//! saved by xgboost and lightgbm) are kept in tests/fuzz/corpus/.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Float32Array, StringArray};
use polars_gbt::random::Rng;
use polars_gbt::{train, Dataset, FeatureColumn, FeatureFrame, Model, PredictOutput, Predictions, TrainConfig};

const HEADER: usize = 24;

fn frame(n: usize, seed: u64) -> FeatureFrame {
    let mut rng = Rng::new(seed, 1);
    let num = |rng: &mut Rng| -> ArrayRef {
        Arc::new(Float32Array::from(
            (0..n).map(|_| (rng.below(7) != 0).then(|| rng.below(1000) as f32 / 100.0 - 5.0)).collect::<Vec<_>>(),
        ))
    };
    let (a, b) = (num(&mut rng), num(&mut rng));
    let keys: Vec<i32> = (0..n).map(|_| rng.below(4) as i32).collect();
    let dict: ArrayRef = Arc::new(
        DictionaryArray::<Int32Type>::try_new(keys.into(), Arc::new(StringArray::from(vec!["p", "q", "r", "s"])))
            .unwrap(),
    );
    FeatureFrame::new(vec![
        FeatureColumn::new("a", vec![a]).unwrap(),
        FeatureColumn::new("b", vec![b]).unwrap(),
        FeatureColumn::new("c", vec![dict]).unwrap(),
    ])
    .unwrap()
}

/// Trained models of each kind: regression, binary, multiclass, loss-guided, categorical.
fn seeds() -> Vec<Model> {
    let x = frame(400, 3);
    let y: Vec<f32> = (0..400).map(|i| (i % 3) as f32).collect();
    [
        r#"{"n_estimators": 3, "max_depth": 3}"#,
        r#"{"objective": "binary:logistic", "n_estimators": 2, "max_depth": 4}"#,
        r#"{"objective": "multi:softprob", "num_class": 3, "n_estimators": 2, "max_depth": 3}"#,
        r#"{"n_estimators": 2, "grow_policy": "lossguide", "max_leaves": 7, "max_depth": 0}"#,
        r#"{"n_estimators": 2, "max_depth": 3, "max_cat_to_onehot": 1}"#,
    ]
    .iter()
    .map(|json| {
        let labels =
            if json.contains("binary") { y.iter().map(|v| (*v > 0.5) as u8 as f32).collect() } else { y.clone() };
        train(&TrainConfig::from_json(json).unwrap(), &Dataset::new(x.clone(), labels).unwrap(), &[]).unwrap()
    })
    .collect()
}

fn iterations() -> usize {
    std::env::var("POLARS_GBT_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000)
}

/// Decodes `bytes` as our model file; see [`check_with`].
fn check(bytes: &[u8], probe: &FeatureFrame) -> Option<String> {
    check_with(&|b: &[u8]| Model::from_bytes(b), bytes, probe)
}

/// Decodes `bytes` with `decode`; if that succeeds, predicts every output on a small frame
/// (and, where a GPU is usable, on the GPU too, which must agree). Returns a description of a
/// panic or a non-finite or disagreeing prediction, None when all is well.
fn check_with(
    decode: &dyn Fn(&[u8]) -> polars_gbt::Result<Model>,
    bytes: &[u8],
    probe: &FeatureFrame,
) -> Option<String> {
    let run = catch_unwind(AssertUnwindSafe(|| -> Option<String> {
        let model = decode(bytes).ok()?;
        let forest = polars_gbt::backend::cuda::availability()
            .is_ok()
            .then(|| model.predictor(polars_gbt::backend::Backend::Cuda).expect("a GPU forest of a valid model"));
        for output in [PredictOutput::Margin, PredictOutput::Value, PredictOutput::Leaf, PredictOutput::Class] {
            let cpu = model.predict(probe, output);
            if let Ok(Predictions::Float { values, .. }) = &cpu {
                if values.iter().any(|v| !v.is_finite()) {
                    return Some(format!("{output:?} predictions are not finite"));
                }
            }
            if let (Some(forest), Ok(cpu)) = (&forest, &cpu) {
                let gpu = model.predict_with(&**forest, probe, output, None).expect("GPU prediction");
                let same = match (cpu, &gpu) {
                    (Predictions::Float { values: a, .. }, Predictions::Float { values: b, .. }) => {
                        a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-5 * x.abs().max(1.0))
                    }
                    (a, b) => a == b,
                };
                if !same {
                    return Some(format!("{output:?}: GPU predictions differ from the CPU's"));
                }
            }
        }
        None
    }));
    match run {
        Ok(found) => found,
        Err(panic) => Some(format!(
            "panic: {}",
            panic.downcast_ref::<String>().map(String::as_str).or(panic.downcast_ref::<&str>().copied()).unwrap_or("?")
        )),
    }
}

/// Keeps a failing input for the regression test, then fails.
fn report(kind: &str, i: usize, bytes: &[u8], what: &str) -> ! {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/crashers");
    let path = dir.join(format!("{kind}-{i}.bin"));
    let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, bytes));
    panic!("{kind} input {i} ({} bytes, saved to {}): {what}", bytes.len(), path.display());
}

/// Rewrites the header's payload length and CRC to match the (mutated) payload.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() >= HEADER {
        let payload_len = (bytes.len() - HEADER) as u64;
        bytes[12..20].copy_from_slice(&payload_len.to_le_bytes());
        let crc = crc32fast::hash(&bytes[HEADER..]);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    }
}

/// One random mutation of `input` in place.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, start: usize) {
    if input.len() <= start {
        input.push(rng.below(256) as u8);
        return;
    }
    let span = input.len() - start;
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let at = start + rng.below(span);
                input[at] ^= 1 << rng.below(8);
            }
        }
        1 => {
            // An integer field (lengths and indices are u64 and u32) set to an extreme.
            let extremes: [u64; 6] = [0, 1, u32::MAX as u64, u64::MAX, 1 << 40, 0x7fff_ffff];
            let v = extremes[rng.below(extremes.len())].to_le_bytes();
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            let at = start + rng.below(span);
            let n = width.min(input.len() - at);
            input[at..at + n].copy_from_slice(&v[..n]);
        }
        2 => input.truncate(start + rng.below(span)),
        3 => {
            let extra: Vec<u8> = (0..1 + rng.below(64)).map(|_| rng.below(256) as u8).collect();
            let at = start + rng.below(span + 1);
            input.splice(at..at, extra);
        }
        4 => {
            // Splice a run of the input over another place of itself.
            let (a, b) = (start + rng.below(span), start + rng.below(span));
            let len = (1 + rng.below(32)).min(input.len() - a.max(b));
            let run: Vec<u8> = input[a..a + len].to_vec();
            input[b..b + len].copy_from_slice(&run);
        }
        _ => {
            let at = start + rng.below(span);
            input[at] = rng.below(256) as u8;
        }
    }
}

#[test]
fn mutated_binary_models_never_panic() {
    let seeds: Vec<Vec<u8>> = seeds().iter().map(Model::to_bytes).collect();
    let probe = frame(64, 9);
    let mut rng = Rng::new(2026, 11);
    let (mut decoded, total) = (0, iterations());
    for i in 0..total {
        let mut input = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input, HEADER);
        }
        // Most inputs get a valid header, so the decoder proper is what gets tested; some
        // keep the mutated one, to test the header checks too.
        if rng.below(8) != 0 {
            reseal(&mut input);
        }
        if let Some(what) = check(&input, &probe) {
            report("binary", i, &input, &what);
        }
        decoded += Model::from_bytes(&input).is_ok() as usize;
    }
    eprintln!("{total} mutated binary models: {decoded} decoded (and predicted), the rest rejected");
}

#[test]
fn mutated_json_models_never_panic() {
    let seeds: Vec<Vec<u8>> = seeds().iter().map(|m| m.to_json().into_bytes()).collect();
    let probe = frame(64, 9);
    let mut rng = Rng::new(2027, 12);
    let (mut decoded, total) = (0, iterations());
    let numbers = ["-1", "0", "4294967295", "18446744073709551615", "1e39", "-0", "3", "99999999999", "null", "[]"];
    for i in 0..total {
        let mut input = seeds[i % seeds.len()].clone();
        if rng.below(2) == 0 {
            // Replace one number of the text with an extreme value.
            let digits: Vec<usize> =
                input.iter().enumerate().filter(|(_, c)| c.is_ascii_digit()).map(|(k, _)| k).collect();
            let at = digits[rng.below(digits.len())];
            let end = at + input[at..].iter().take_while(|c| c.is_ascii_digit() || **c == b'.').count();
            input.splice(at..end, numbers[rng.below(numbers.len())].bytes());
        } else {
            mutate(&mut rng, &mut input, 1);
        }
        if let Some(what) = check(&input, &probe) {
            report("json", i, &input, &what);
        }
        decoded += Model::from_bytes(&input).is_ok() as usize;
    }
    eprintln!("{total} mutated JSON models: {decoded} decoded (and predicted), the rest rejected");
}

#[test]
fn headers_that_claim_huge_payloads_fail_fast() {
    let mut bytes = seeds()[0].to_bytes();
    bytes[12..20].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let start = std::time::Instant::now();
    assert!(Model::from_bytes(&bytes).is_err());
    // And a payload whose vector lengths claim 10^12 elements.
    let mut payload = vec![0xffu8; 64];
    payload[..8].copy_from_slice(&1_000_000_000_000u64.to_le_bytes());
    let mut crafted = seeds()[0].to_bytes()[..HEADER].to_vec();
    crafted.extend_from_slice(&payload);
    reseal(&mut crafted);
    assert!(Model::from_bytes(&crafted).is_err());
    assert!(start.elapsed().as_secs_f64() < 1.0, "rejecting took {:?}", start.elapsed());
}

#[test]
fn saved_crashers_stay_fixed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/crashers");
    let probe = frame(64, 9);
    let lightgbm = |b: &[u8]| Model::from_lightgbm(&String::from_utf8_lossy(b));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let bytes = std::fs::read(entry.path()).unwrap();
        let found = if name.starts_with("xgboost-") {
            check_with(&|b: &[u8]| Model::from_xgboost(b), &bytes, &probe)
        } else if name.starts_with("lightgbm-") {
            check_with(&lightgbm, &bytes, &probe)
        } else {
            check(&bytes, &probe)
        };
        if let Some(what) = found {
            panic!("{}: {what}", entry.path().display());
        }
    }
}

/// Corpus files (models saved by XGBoost and LightGBM) whose names start with `prefix`.
fn corpus(prefix: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Text mutations: a number replaced by an extreme value, or a byte-level mutation.
fn mutate_text(rng: &mut Rng, input: &mut Vec<u8>) {
    let numbers =
        ["-1", "0", "4294967295", "18446744073709551615", "1e39", "-0", "3", "99999999999", "NaN", "-Infinity"];
    let digits: Vec<usize> = input.iter().enumerate().filter(|(_, c)| c.is_ascii_digit()).map(|(k, _)| k).collect();
    if rng.below(2) == 0 && !digits.is_empty() {
        let at = digits[rng.below(digits.len())];
        let end = at + input[at..].iter().take_while(|c| c.is_ascii_digit() || **c == b'.').count();
        input.splice(at..end, numbers[rng.below(numbers.len())].bytes());
    } else {
        mutate(rng, input, 1);
    }
}

#[test]
fn mutated_xgboost_models_never_panic() {
    // XGBoost's own files (JSON and UBJSON) and our models exported as XGBoost JSON.
    let mut inputs = corpus("xgboost-");
    inputs.extend(seeds().iter().map(|m| m.to_xgboost_json().into_bytes()));
    let seeds = inputs;
    let probe = frame(64, 9);
    let mut rng = Rng::new(2028, 13);
    let (mut decoded, total) = (0, iterations());
    for i in 0..total {
        let mut input = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(3) {
            if input.first() == Some(&b'{') && input.get(1) == Some(&b'"') {
                mutate_text(&mut rng, &mut input);
            } else {
                mutate(&mut rng, &mut input, 1);
            }
        }
        if let Some(what) = check_with(&|b: &[u8]| Model::from_xgboost(b), &input, &probe) {
            report("xgboost", i, &input, &what);
        }
        decoded += Model::from_xgboost(&input).is_ok() as usize;
    }
    eprintln!("{total} mutated XGBoost models: {decoded} imported (and predicted), the rest rejected");
}

#[test]
fn mutated_lightgbm_models_never_panic() {
    let seeds = corpus("lightgbm-");
    let probe = frame(64, 9);
    let mut rng = Rng::new(2029, 14);
    let decode = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(text) => Model::from_lightgbm(text),
        Err(_) => Err(polars_gbt::Error::Model("not UTF-8".into())),
    };
    let (mut decoded, total) = (0, iterations());
    for i in 0..total {
        let mut input = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(3) {
            mutate_text(&mut rng, &mut input);
        }
        if let Some(what) = check_with(&decode, &input, &probe) {
            report("lightgbm", i, &input, &what);
        }
        decoded += decode(&input).is_ok() as usize;
    }
    eprintln!("{total} mutated LightGBM models: {decoded} imported (and predicted), the rest rejected");
}
