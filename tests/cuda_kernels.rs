//! The kernels compile with NVRTC for every architecture we support, and the structs they
//! share with Rust have the same layout on both sides. Needs libnvrtc, not a GPU: CI installs
//! the `nvidia-cuda-nvrtc` wheel (see scripts/test.sh) and sets POLARS_GBT_REQUIRE_NVRTC=1.
#![cfg(feature = "cuda")]

use polars_gbt::backend::cuda::{kernels, layout, runtime};

fn nvrtc() -> bool {
    match runtime::probe_nvrtc() {
        Ok(()) => true,
        Err(why) => {
            assert!(std::env::var_os("POLARS_GBT_REQUIRE_NVRTC").is_none(), "NVRTC is required here: {why}");
            eprintln!("NVRTC not found, kernels not compiled: {why}");
            false
        }
    }
}

#[test]
fn kernels_compile_for_turing_ampere_and_hopper_with_the_rust_layouts() {
    if !nvrtc() {
        return;
    }
    let (probe, expected) = layout::layout_probe();
    let source = format!("{}\n{probe}", kernels::SOURCE);
    for arch in ["sm_75", "sm_80", "sm_90"] {
        let ptx = kernels::compile(&source, arch).unwrap_or_else(|e| panic!("{e}"));
        for name in [
            "histogram_u8",
            "evaluate_features",
            "scatter",
            "add_tree_u8",
            "bin_columns_u16",
            "sort_segments",
            "segment_cuts",
            "quantise",
            "lambdarank",
            "gather_rows",
        ] {
            assert!(ptx.contains(&format!(".entry {name}(")), "{arch}: kernel {name} missing from the PTX");
        }
        let found = layout::read_layout_probe(&ptx, expected.len()).unwrap();
        for ((what, want), got) in expected.iter().zip(found) {
            assert_eq!(got, *want, "{arch}: {what} is {got} in CUDA but {want} in Rust");
        }
        // The device's own exp (ex2.approx) and subnormal flushing round differently from the
        // host: kernels/math.cuh replaces the one, the options rule out the other.
        for op in ["ex2.approx", ".ftz.f32", "fma.rn.f32", "fma.rn.f64"] {
            assert!(!ptx.contains(op), "{arch}: the PTX uses {op}, which the CPU cannot reproduce");
        }
        // What the runtime loads: machine code for the architecture, an ELF image.
        let cubin = kernels::compile_cubin(kernels::SOURCE, arch).unwrap_or_else(|e| panic!("{e}"));
        assert!(cubin.starts_with(b"\x7fELF"), "{arch}: NVRTC's machine code is not an ELF image");
    }
}

#[test]
fn the_layout_probe_catches_a_mismatch() {
    if !nvrtc() {
        return;
    }
    let (probe, expected) = layout::layout_probe();
    // A kernel-side struct with two fields swapped must be caught.
    let swapped =
        kernels::SOURCE.replace("    u32 split_bin;\n    u32 missing_bin;", "    u32 missing_bin;\n    u32 split_bin;");
    assert_ne!(swapped, kernels::SOURCE, "the fields to swap were not found");
    let ptx = kernels::compile(&format!("{swapped}\n{probe}"), "sm_80").unwrap();
    let found = layout::read_layout_probe(&ptx, expected.len()).unwrap();
    let mismatches = expected.iter().zip(&found).filter(|((_, want), got)| *want != **got).count();
    assert!(mismatches >= 2, "a swap of two fields went unnoticed");
}

#[test]
fn the_probe_catches_a_renumbered_code() {
    if !nvrtc() {
        return;
    }
    let (probe, expected) = layout::layout_probe();
    // A link code changed on the kernel side only must be caught, by its name.
    let renumbered = kernels::SOURCE.replace("#define LINK_EXP 2u", "#define LINK_EXP 7u");
    assert_ne!(renumbered, kernels::SOURCE, "the link code to change was not found");
    let ptx = kernels::compile(&format!("{renumbered}\n{probe}"), "sm_80").unwrap();
    let found = layout::read_layout_probe(&ptx, expected.len()).unwrap();
    let wrong: Vec<&str> = expected
        .iter()
        .zip(&found)
        .filter(|((_, want), got)| *want != **got)
        .map(|((what, _), _)| what.as_str())
        .collect();
    assert_eq!(wrong, ["LINK_EXP"]);
}

#[test]
fn the_rounding_check_sees_the_devices_own_exp() {
    if !nvrtc() {
        return;
    }
    // What the check in the first test looks for is what CUDA's expf compiles to.
    let with_expf = kernels::SOURCE
        .replace("const float prob = portable_sigmoidf(m);", "const float prob = 1.0f / (1.0f + expf(-m));");
    assert_ne!(with_expf, kernels::SOURCE, "the logistic gradient was not found");
    assert!(kernels::compile(&with_expf, "sm_80").unwrap().contains("ex2.approx"));
}
