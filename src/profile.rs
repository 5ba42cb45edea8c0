//! `POLARS_GBT_PROFILE=1`: each step of a fit's set-up and each stage of growth times itself
//! and says so on stderr (GPU steps then end with a synchronisation, which slows them a little).

/// Whether steps time themselves and print their times.
pub fn on() -> bool {
    std::env::var_os("POLARS_GBT_PROFILE").is_some_and(|v| v == "1")
}

/// `POLARS_GBT_PROFILE=calls`: a GPU fit counts its launches, uploads and read-backs, and the
/// host's time in each, with no synchronisation added (what a fit's fixed costs are).
pub fn calls_on() -> bool {
    std::env::var_os("POLARS_GBT_PROFILE").is_some_and(|v| v == "calls")
}

thread_local! {
    /// Whether the fit running on this thread was asked to say what it chooses (`verbose`).
    static NOTES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A choice a fit made that its user may want to know of (where its data lives on the GPU,
/// and why): printed on stderr when the fit on this thread is verbose ([`notes`]) or profiled.
pub fn note(text: &str) {
    if NOTES.with(|n| n.get()) || on() {
        eprintln!("polars-gbt: {text}");
    }
}

/// Turns [`note`]s on for this thread while the guard lives, when `verbose`.
pub fn notes(verbose: bool) -> NotesGuard {
    NotesGuard(NOTES.with(|n| n.replace(verbose)))
}

/// Restores the thread's earlier setting of [`notes`] when dropped.
pub struct NotesGuard(bool);

impl Drop for NotesGuard {
    fn drop(&mut self) {
        NOTES.with(|n| n.set(self.0));
    }
}

/// Seconds spent in each of `N` stages, summed over a fit; timed only when profiling is on.
#[derive(Clone, Copy, Debug)]
pub struct StageTimes<const N: usize> {
    on: bool,
    pub seconds: [f64; N],
}

impl<const N: usize> Default for StageTimes<N> {
    fn default() -> Self {
        StageTimes { on: on(), seconds: [0.0; N] }
    }
}

impl<const N: usize> StageTimes<N> {
    /// Whether stages are timed.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// The start of a timed step (None when profiling is off).
    pub fn start(&self) -> Option<std::time::Instant> {
        self.on.then(std::time::Instant::now)
    }

    /// Adds the time since `started` to `stage`.
    pub fn stop(&mut self, stage: usize, started: Option<std::time::Instant>) {
        if let Some(t) = started {
            self.seconds[stage] += t.elapsed().as_secs_f64();
        }
    }
}
