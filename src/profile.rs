//! `POLARS_GBT_PROFILE=1`: each step of a fit's set-up and each stage of growth times itself
//! and says so on stderr (GPU steps then end with a synchronisation, which slows them a little).

/// Whether steps time themselves and print their times.
pub fn on() -> bool {
    std::env::var_os("POLARS_GBT_PROFILE").is_some_and(|v| v == "1")
}
