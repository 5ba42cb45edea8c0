//! What a fit shows while it runs: the evaluation log every `verbose` rounds, and with
//! `progress=True` one line on stderr redrawn in place ([`ProgressLine`]), for the rounds and
//! for each pass of a streamed fit's reading.

use std::time::{Duration, Instant};

use super::interrupt::interrupt_epoch;
use super::kwargs::FitKwargs;
use crate::data::{Pass, PassProgress};
use crate::{RoundLog, TrainConfig};

/// One progress line on stderr, redrawn in place at most ten times a second and always on its
/// last draw (which ends the line): `[=========>          ] 120/250 rounds    3.1 s`, or
/// `[======>    ] pass 1 (cut points) 1,250,000/3,000,000 rows    2.1 s`. Written with `\r`
/// rather than terminal codes, so that it draws alike in a terminal, a notebook and a log.
pub(super) struct ProgressLine {
    start: Instant,
    drawn: Option<Instant>,
}

impl ProgressLine {
    const REDRAW: Duration = Duration::from_millis(100);

    pub(super) fn new() -> Self {
        ProgressLine { start: Instant::now(), drawn: None }
    }

    /// Draws `done` `unit`s of `total` (a bar when the total is known) after `label`; `last`
    /// ends the line.
    fn show(&mut self, label: &str, done: usize, total: Option<usize>, unit: &str, last: bool) {
        let now = Instant::now();
        if !last && self.drawn.is_some_and(|t| now - t < Self::REDRAW) {
            return;
        }
        self.drawn = Some(now);
        let mut line = match total {
            Some(total) => format!("[{}] ", bar(done, total)),
            None => String::new(),
        };
        if !label.is_empty() {
            line += label;
            line.push(' ');
        }
        line += &match total {
            Some(total) => format!("{}/{} {unit}", thousands(done), thousands(total)),
            None => format!("{} {unit}", thousands(done)),
        };
        let end = if last { "\n" } else { "" };
        eprint!("\r{line} {:6.1} s{end}", self.start.elapsed().as_secs_f64());
    }

    /// After round `done` of `total`.
    pub(super) fn rounds(&mut self, done: usize, total: usize) {
        self.show("", done, Some(total), "rounds", done >= total);
    }

    /// Where a streamed fit's reading is.
    pub(super) fn pass(&mut self, p: &PassProgress) {
        let label = match p.pass {
            Pass::Count => "counting rows".to_string(),
            Pass::CutPoints => "pass 1 (cut points)".to_string(),
            Pass::Binning => "pass 2 (binning)".to_string(),
            Pass::Eval(name) => format!("eval set `{name}` (binning)"),
        };
        self.show(&label, p.rows, p.total, "rows", p.done);
    }
}

/// The cells of a progress bar, `done` of `total` filled: `=========>          `.
fn bar(done: usize, total: usize) -> String {
    const WIDTH: usize = 30;
    let filled = WIDTH * done / total.max(1);
    (0..WIDTH)
        .map(|i| match i.cmp(&filled) {
            std::cmp::Ordering::Less => '=',
            std::cmp::Ordering::Equal => '>',
            std::cmp::Ordering::Greater => ' ',
        })
        .collect()
}

/// `n` with thousands separated by commas: `3,000,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// What a fit does after each round: print the evaluation log every `verbose` rounds, draw
/// the progress line, and stop when the fit was interrupted (`interrupt::interrupt_fits`).
/// With verbose output it says first where the fit runs when "auto" chose the CPU (and why).
pub(super) fn round_logger(cfg: &TrainConfig, kwargs: &FitKwargs) -> impl FnMut(&RoundLog) -> crate::Result<bool> {
    // A fit started before an interrupt stops at its next round.
    let epoch = interrupt_epoch();
    let (every, rounds) = (kwargs.verbose, cfg.n_estimators);
    let mut progress = kwargs.progress.then(ProgressLine::new);
    if every > 0 {
        if let Ok((_, Some(note))) = crate::backend::select(cfg) {
            eprintln!("polars-gbt: {note}");
        }
    }
    move |round: &RoundLog| {
        if every > 0 && !round.values.is_empty() && (round.round.is_multiple_of(every) || round.round + 1 == rounds) {
            eprintln!("{round}");
        }
        if let Some(line) = &mut progress {
            line.rounds(round.round + 1, rounds);
        }
        if interrupt_epoch() != epoch {
            return Err(crate::Error::Interrupted);
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_fills_in_proportion_and_counts_read_in_thousands() {
        assert_eq!(bar(0, 4), format!(">{}", " ".repeat(29)));
        assert_eq!(bar(2, 4), format!("{}>{}", "=".repeat(15), " ".repeat(14)));
        assert_eq!(bar(4, 4), "=".repeat(30));
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(3_000_000), "3,000,000");
    }
}
