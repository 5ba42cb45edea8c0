//! Execution backends. The boundary is coarse, as DESIGN.md asks: a backend grows a whole
//! tree from this round's gradients; everything that is not execution (cuts, split math,
//! objectives, the model) is shared. The CPU backend is also the oracle for tests.

pub mod cpu;
