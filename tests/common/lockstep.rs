//! Two backends grown in lockstep by the one growth driver, compared after every step, so
//! that when their trees differ the first step that diverged is named: the partition (a
//! node's rows), the histogram, or the split search.

use polars_gbt::backend::cpu::CpuLearner;
use polars_gbt::backend::Learner;
use polars_gbt::data::cuts::compute_cuts;
use polars_gbt::data::{BinnedMatrix, FeatureCuts};
use polars_gbt::error::{Error, Result};
use polars_gbt::objective::{loss_for, Loss, Targets};
use polars_gbt::tree::grow::{Expansion, GrowSteps, Open, TreeContext};
use polars_gbt::tree::{grow_tree, GradSum, GrowParams, Quantiser, Tree};
use polars_gbt::{Dataset, TrainConfig};

/// A node as both backends hold it (each taken out while its backend works on it).
pub struct Both<A, B>(Option<A>, Option<B>);

/// Runs `a` (the oracle) and `b` side by side; `divergence` holds the first difference found,
/// after which growth stops with an error.
pub struct Lockstep<A, B> {
    pub a: A,
    pub b: B,
    /// Where each feature's slots start in a histogram (the last entry: the total).
    offsets: Vec<usize>,
    /// Steps compared so far: (partitions, histograms, split searches).
    pub checked: (usize, usize, usize),
    pub divergence: Option<String>,
}

impl<A: GrowSteps, B: GrowSteps> Lockstep<A, B> {
    pub fn new(a: A, b: B, cuts: &[FeatureCuts]) -> Self {
        let mut offsets = vec![0];
        for c in cuts {
            offsets.push(offsets.last().unwrap() + c.n_bins() as usize + 1);
        }
        Lockstep { a, b, offsets, checked: (0, 0, 0), divergence: None }
    }

    fn diverged(&mut self, what: String) -> Result<()> {
        self.divergence.get_or_insert(what.clone());
        Err(Error::Data(format!("the backends diverged: {what}")))
    }

    /// Compares one node's rows, then its histogram over the tree's features, then its best
    /// split; the first difference is the divergence.
    fn compare(&mut self, o: &Open<Both<A::Node, B::Node>>, best_b: &Open<()>, ctx: &TreeContext) -> Result<()> {
        let at = format!("node {} at depth {}", o.node, o.depth);
        let (na, nb) = (o.state.0.as_ref().unwrap(), o.state.1.as_ref().unwrap());
        let (ra, rb) = (self.a.rows(na)?, self.b.rows(nb)?);
        if ra != rb {
            let first = ra.iter().zip(&rb).position(|(x, y)| x != y).unwrap_or(ra.len().min(rb.len()));
            return self.diverged(format!(
                "partition: {at} has {} rows in one backend and {} in the other (first difference at position {first})",
                ra.len(),
                rb.len()
            ));
        }
        self.checked.0 += 1;
        let (ha, hb) = (self.a.histogram(na)?, self.b.histogram(nb)?);
        for &f in ctx.tree_features {
            let slots = self.offsets[f as usize]..self.offsets[f as usize + 1];
            if let Some(k) = slots.clone().find(|&s| ha[s] != hb[s]) {
                let (x, y): (GradSum, GradSum) = (ha[k], hb[k]);
                return self
                    .diverged(format!("histogram: {at}, feature {f}, bin {}: {x:?} against {y:?}", k - slots.start));
            }
        }
        self.checked.1 += 1;
        if o.best != best_b.best {
            return self.diverged(format!("split search: {at}: {:?} against {:?}", o.best, best_b.best));
        }
        self.checked.2 += 1;
        Ok(())
    }
}

/// `o` with its state replaced by `state`.
fn with_state<N, M>(o: &Open<N>, state: M) -> Open<M> {
    Open {
        node: o.node,
        key: o.key,
        depth: o.depth,
        total: o.total,
        sums: o.sums.clone(),
        limits: o.limits.clone(),
        output_limits: o.output_limits.clone(),
        best: o.best.clone(),
        state,
    }
}

impl<A: GrowSteps, B: GrowSteps> GrowSteps for Lockstep<A, B> {
    type Node = Both<A::Node, B::Node>;

    fn build_root(&mut self, ctx: &TreeContext) -> Result<Self::Node> {
        Ok(Both(Some(self.a.build_root(ctx)?), Some(self.b.build_root(ctx)?)))
    }

    fn evaluate(&mut self, nodes: &mut [Open<Self::Node>], ctx: &TreeContext) -> Result<()> {
        let (mut on_a, mut on_b): (Vec<_>, Vec<_>) = nodes
            .iter_mut()
            .map(|o| {
                let (a, b) = (o.state.0.take().unwrap(), o.state.1.take().unwrap());
                (with_state(o, a), with_state(o, b))
            })
            .unzip();
        self.a.evaluate(&mut on_a, ctx)?;
        self.b.evaluate(&mut on_b, ctx)?;
        let mut bests_b = Vec::with_capacity(nodes.len());
        for ((o, a), b) in nodes.iter_mut().zip(on_a).zip(on_b) {
            o.best = a.best;
            o.state = Both(Some(a.state), Some(b.state));
            bests_b.push(Open {
                node: b.node,
                key: b.key,
                depth: b.depth,
                total: b.total,
                sums: b.sums,
                limits: b.limits,
                output_limits: b.output_limits,
                best: b.best,
                state: (),
            });
        }
        for (o, b) in nodes.iter().zip(&bests_b) {
            self.compare(o, b, ctx)?;
        }
        Ok(())
    }

    fn partition_and_build(
        &mut self,
        tree: &Tree,
        expansions: Vec<Expansion<Self::Node>>,
        ctx: &TreeContext,
    ) -> Result<Vec<Option<[Self::Node; 2]>>> {
        fn side<N, M>(e: &Expansion<N>, state: M) -> Expansion<M> {
            Expansion {
                node: e.node,
                key: e.key,
                depth: e.depth,
                split: e.split.clone(),
                children: e.children,
                grow_children: e.grow_children,
                child_limits: e.child_limits.clone(),
                state,
            }
        }
        let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
        for mut e in expansions {
            let (sa, sb) = (e.state.0.take().unwrap(), e.state.1.take().unwrap());
            on_a.push(side(&e, sa));
            on_b.push(side(&e, sb));
        }
        let built_a = self.a.partition_and_build(tree, on_a, ctx)?;
        let built_b = self.b.partition_and_build(tree, on_b, ctx)?;
        Ok(built_a
            .into_iter()
            .zip(built_b)
            .map(|pair| match pair {
                (Some([la, ra]), Some([lb, rb])) => Some([Both(Some(la), Some(lb)), Both(Some(ra), Some(rb))]),
                (None, None) => None,
                _ => panic!("one backend built children where the other did not"),
            })
            .collect())
    }

    fn discard(&mut self, node: Self::Node) {
        let Both(a, b) = node;
        a.into_iter().for_each(|n| self.a.discard(n));
        b.into_iter().for_each(|n| self.b.discard(n));
    }

    fn renumber(&mut self, ids: &[u32], merged: &[u32]) -> Result<()> {
        self.a.renumber(ids, merged)?;
        self.b.renumber(ids, merged)
    }

    fn histogram(&mut self, node: &Self::Node) -> Result<Vec<GradSum>> {
        self.a.histogram(node.0.as_ref().unwrap())
    }

    fn rows(&mut self, node: &Self::Node) -> Result<Vec<u32>> {
        self.a.rows(node.0.as_ref().unwrap())
    }
}

/// A fit's pieces that both learners of a lockstep are built from: the cut points, the loss,
/// and the starting margins (the loss's base margin on every row).
pub struct Setup {
    pub cfg: TrainConfig,
    pub cuts: Vec<FeatureCuts>,
    /// The configuration's growth parameters, constraints resolved against the features.
    pub grow: GrowParams,
    pub loss: Box<dyn Loss>,
    pub margin: Vec<f32>,
}

impl Setup {
    pub fn new(json: &str, data: &Dataset) -> Self {
        let cfg = TrainConfig::from_json(json).unwrap();
        let cuts = compute_cuts(data.features(), data.weight(), cfg.max_bin, cfg.seed).unwrap();
        let loss = loss_for(cfg.objective, &cfg.objective_params());
        let base = loss.estimate_base_margin(&targets(data));
        let margin = base.iter().flat_map(|&b| std::iter::repeat_n(b, data.n_rows())).collect();
        let categorical: Vec<bool> = cuts.iter().map(FeatureCuts::is_categorical).collect();
        let grow = cfg.grow_params(&data.features().names(), &categorical).unwrap();
        Setup { cfg, cuts, grow, loss, margin }
    }

    /// A CPU learner over `data`, its gradients computed for the first round.
    pub fn cpu_learner(&self, data: &Dataset) -> CpuLearner<'_> {
        let binned = BinnedMatrix::new(data.features(), &self.cuts);
        let mut learner = CpuLearner::new(
            std::borrow::Cow::Owned(binned),
            &self.cuts,
            self.grow.clone(),
            self.margin.clone(),
            None,
            None,
        );
        learner.compute_gradients(&*self.loss, &targets(data)).unwrap();
        learner
    }
}

pub fn targets(d: &Dataset) -> Targets<'_> {
    Targets { label: d.label(), label_upper: d.label_upper(), weight: d.weight(), groups: d.group_offsets() }
}

/// Grows one tree with `a` and `b` in lockstep (`a`'s scales and total drive it); returns the
/// tree, or the first divergence.
pub fn grow_in_lockstep<A: GrowSteps, B: GrowSteps>(
    both: &mut Lockstep<A, B>,
    setup: &Setup,
    start: (Quantiser, GradSum),
    tree_features: &[u32],
    seed: u64,
) -> std::result::Result<Tree, String> {
    let ctx = TreeContext { params: &setup.grow, quantiser: start.0, tree_features, seed, outputs: &[] };
    let grown = grow_tree(both, &ctx, &setup.cuts, start.1);
    match (&both.divergence, grown) {
        (Some(d), _) => Err(d.clone()),
        (None, Ok(tree)) => Ok(tree),
        (None, Err(e)) => Err(format!("growth failed: {e}")),
    }
}
