//! Our models as ONNX graphs, for onnxruntime and the runtimes that read ONNX.
//!
//! The trees are one `TreeEnsemble` node of `ai.onnx.ml` opset 5, the first tree-ensemble
//! operator with set-membership branches (`BRANCH_MEMBER`), so categorical splits are kept as
//! they are rather than unrolled into chains of equality tests. The graph takes one input per
//! feature, named as the model's features, so a frame's columns are fed by name:
//!
//! ```text
//! numeric  x: float[N] ──(missing= sentinel -> NaN)── Reshape [N,1] ─┐
//! category c: string[N] ── LabelEncoder (name -> code, unseen -> -1) ─┤ Concat [N,F]
//!                                                                      ▼
//!                TreeEnsemble (sum of leaves per output) ── Add base margin ── margin [N,k]
//!                                                                      ▼
//!                         link: Sigmoid / Softmax / Exp / (Greater 0, Cast) / ArgMax ── value
//! ```
//!
//! Numeric splits are `BRANCH_LT` (ours send `x < threshold` left, the true branch); a
//! categorical split tests membership of its left-going codes; every node's missing direction
//! is `nodes_missing_value_tracks_true`, so NaN follows the learned default. An unseen
//! category is code -1, in no set: it goes right, as ours do. Categorical features without
//! category names (models imported from LightGBM) take their codes as floats. One output is
//! `[N]`, several are `[N, k]`; the outputs are `value` (what `predict` gives) and `margin`.
//!
//! The protobuf is written here, field by field (a few dozen lines): the crate takes no
//! protobuf or ONNX dependency for it.

use crate::error::{Error, Result};
use crate::model::{FeatureInfo, Model};
use crate::objective::{Link, Objective};
use crate::tree::Tree;

/// The `ai.onnx.ml` opset of `TreeEnsemble` (set membership), and the ONNX opset and IR
/// version that go with it (ONNX 1.16's release).
const ML_OPSET: i64 = 5;
const ONNX_OPSET: i64 = 21;
const IR_VERSION: i64 = 10;
const ML: &str = "ai.onnx.ml";

/// The graph's outputs; no feature may take these names.
const ONNX_OUTPUTS: [&str; 2] = ["value", "margin"];

// TensorProto.DataType
const FLOAT: i64 = 1;
const UINT8: i64 = 2;
const INT64: i64 = 7;
const STRING: i64 = 8;

// TreeEnsemble's node modes.
const BRANCH_LEQ: u8 = 0;
const BRANCH_LT: u8 = 1;
const BRANCH_MEMBER: u8 = 6;

/// A protobuf message being written: fields in order, as tag, then value.
#[derive(Default)]
struct Proto(Vec<u8>);

impl Proto {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }

    /// An integer field (int32, int64 and enums are all varints; negatives take 10 bytes).
    fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.tag(field, 0);
        self.varint(v as u64);
        self
    }

    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    fn message(&mut self, field: u32, m: Proto) -> &mut Self {
        self.bytes(field, &m.0)
    }

    fn packed_ints(&mut self, field: u32, v: &[i64]) -> &mut Self {
        let mut p = Proto::default();
        v.iter().for_each(|&x| p.varint(x as u64));
        self.bytes(field, &p.0)
    }

    fn packed_floats(&mut self, field: u32, v: &[f32]) -> &mut Self {
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.bytes(field, &b)
    }
}

/// A tensor's values, for an initializer or a tensor attribute.
enum Values<'a> {
    Float(&'a [f32]),
    Int64(&'a [i64]),
    Uint8(&'a [u8]),
}

/// TensorProto: dims 1, data_type 2, float_data 4, int64_data 7, name 8, raw_data 9.
fn tensor(name: &str, dims: &[i64], values: Values) -> Proto {
    let mut t = Proto::default();
    t.packed_ints(1, dims);
    match values {
        Values::Float(v) => t.int(2, FLOAT).packed_floats(4, v),
        Values::Int64(v) => t.int(2, INT64).packed_ints(7, v),
        Values::Uint8(v) => t.int(2, UINT8).bytes(9, v),
    };
    if !name.is_empty() {
        t.string(8, name);
    }
    t
}

/// A node attribute (AttributeProto: name 1, f 2, i 3, s 4, t 5, floats 7, ints 8, strings
/// 9, type 20).
enum Attr<'a> {
    Int(i64),
    Ints(&'a [i64]),
    Floats(&'a [f32]),
    Strings(&'a [String]),
    Float(f32),
    Tensor(Proto),
}

fn attribute(name: &str, value: Attr) -> Proto {
    let mut a = Proto::default();
    a.string(1, name);
    match value {
        Attr::Float(f) => {
            a.tag(2, 5);
            a.0.extend_from_slice(&f.to_le_bytes());
            a.int(20, 1)
        }
        Attr::Int(i) => a.int(3, i).int(20, 2),
        Attr::Tensor(t) => a.message(5, t).int(20, 4),
        Attr::Floats(v) => a.packed_floats(7, v).int(20, 6),
        Attr::Ints(v) => a.packed_ints(8, v).int(20, 7),
        Attr::Strings(v) => {
            v.iter().for_each(|s| {
                a.string(9, s);
            });
            a.int(20, 8)
        }
    };
    a
}

/// The graph being built: its nodes, initializers and fresh names for the values between
/// nodes (prefixed so that they cannot meet a feature's name: inputs are the features').
struct Graph {
    nodes: Vec<Proto>,
    initializers: Vec<Proto>,
    n_values: usize,
}

impl Graph {
    fn fresh(&mut self, what: &str) -> String {
        self.n_values += 1;
        format!("polars_gbt/{what}/{}", self.n_values)
    }

    /// NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
    fn node(&mut self, op: &str, domain: &str, inputs: &[&str], output: &str, attrs: Vec<(&str, Attr)>) {
        let mut n = Proto::default();
        inputs.iter().for_each(|i| {
            n.string(1, i);
        });
        n.string(2, output).string(3, &format!("{op}_{}", self.nodes.len())).string(4, op);
        for (name, value) in attrs {
            n.message(5, attribute(name, value));
        }
        if !domain.is_empty() {
            n.string(7, domain);
        }
        self.nodes.push(n);
    }

    /// `op(inputs)` into a fresh value, which it returns.
    fn apply(&mut self, op: &str, inputs: &[&str], attrs: Vec<(&str, Attr)>) -> String {
        let out = self.fresh(&op.to_lowercase());
        self.node(op, "", inputs, &out, attrs);
        out
    }

    fn constant(&mut self, what: &str, dims: &[i64], values: Values) -> String {
        let name = self.fresh(what);
        self.initializers.push(tensor(&name, dims, values));
        name
    }
}

/// ValueInfoProto of a tensor (name 1, type 2: TypeProto.tensor_type 1: elem_type 1, shape 2
/// of dims 1: dim_value 1 or dim_param 2).
fn value_info(name: &str, elem_type: i64, dims: &[Option<i64>]) -> Proto {
    let mut shape = Proto::default();
    for d in dims {
        let mut dim = Proto::default();
        match d {
            Some(v) => dim.int(1, *v),
            None => dim.string(2, "N"),
        };
        shape.message(1, dim);
    }
    let mut tensor_type = Proto::default();
    tensor_type.int(1, elem_type).message(2, shape);
    let mut ty = Proto::default();
    ty.message(1, tensor_type);
    let mut v = Proto::default();
    v.string(1, name).message(2, ty);
    v
}

/// The trees as `TreeEnsemble`'s attributes.
#[derive(Default)]
struct Ensemble {
    roots: Vec<i64>,
    modes: Vec<u8>,
    features: Vec<i64>,
    splits: Vec<f32>,
    true_ids: Vec<i64>,
    true_leafs: Vec<i64>,
    false_ids: Vec<i64>,
    false_leafs: Vec<i64>,
    missing_true: Vec<i64>,
    /// Each membership node's codes, the sets separated by NaN.
    members: Vec<f32>,
    leaf_targets: Vec<i64>,
    leaf_weights: Vec<f32>,
}

impl Ensemble {
    /// Tree `t` of the model (adding to output `output`): its inner nodes as `nodes_*`
    /// entries, its leaves as `leaf_*` entries, children by their positions there.
    fn add(&mut self, t: &Tree, output: usize) {
        // Where each of the tree's nodes lands: (is a leaf, position among nodes or leaves).
        let mut place = vec![(false, 0i64); t.n_nodes()];
        let first_node = self.modes.len();
        let (mut n_inner, mut n_leaves) = (first_node as i64, self.leaf_weights.len() as i64);
        for (i, p) in place.iter_mut().enumerate() {
            if t.is_leaf(i as u32) {
                *p = (true, n_leaves);
                n_leaves += 1;
                self.leaf_targets.push(output as i64);
                self.leaf_weights.push(t.value[i]);
            } else {
                *p = (false, n_inner);
                n_inner += 1;
            }
        }
        self.roots.push(first_node as i64);
        if t.is_leaf(0) {
            // A lone leaf: one node whose branches both reach it.
            let leaf = place[0].1;
            self.push_node(BRANCH_LEQ, 0, 0.0, (true, leaf), (true, leaf), false);
            return;
        }
        for i in 0..t.n_nodes() {
            if t.is_leaf(i as u32) {
                continue;
            }
            let (left, right) = (place[t.left[i] as usize], place[t.right[i] as usize]);
            let feature = t.feature[i] as i64;
            if t.is_categorical(i as u32) {
                let words = &t.category_words[t.category_start[i] as usize..][..t.category_len[i] as usize];
                let codes: Vec<f32> =
                    (0..words.len() * 32).filter(|&c| words[c / 32] & (1 << (c % 32)) != 0).map(|c| c as f32).collect();
                if codes.is_empty() {
                    // No category goes left: every present value goes right, as `x < -inf`.
                    self.push_node(BRANCH_LT, feature, f32::NEG_INFINITY, left, right, t.default_left[i]);
                } else {
                    if !self.members.is_empty() {
                        self.members.push(f32::NAN);
                    }
                    self.members.extend(codes);
                    self.push_node(BRANCH_MEMBER, feature, 0.0, left, right, t.default_left[i]);
                }
            } else {
                self.push_node(BRANCH_LT, feature, t.threshold[i], left, right, t.default_left[i]);
            }
        }
    }

    fn push_node(&mut self, mode: u8, feature: i64, split: f32, yes: (bool, i64), no: (bool, i64), missing: bool) {
        self.modes.push(mode);
        self.features.push(feature);
        self.splits.push(split);
        self.true_leafs.push(yes.0 as i64);
        self.true_ids.push(yes.1);
        self.false_leafs.push(no.0 as i64);
        self.false_ids.push(no.1);
        self.missing_true.push(missing as i64);
    }

    fn attributes(&self, n_outputs: usize) -> Vec<(&'static str, Attr<'_>)> {
        let n = self.modes.len() as i64;
        let mut attrs = vec![
            ("n_targets", Attr::Int(n_outputs as i64)),
            ("aggregate_function", Attr::Int(1)),
            ("post_transform", Attr::Int(0)),
            ("tree_roots", Attr::Ints(&self.roots)),
            ("nodes_modes", Attr::Tensor(tensor("", &[n], Values::Uint8(&self.modes)))),
            ("nodes_featureids", Attr::Ints(&self.features)),
            ("nodes_splits", Attr::Tensor(tensor("", &[n], Values::Float(&self.splits)))),
            ("nodes_truenodeids", Attr::Ints(&self.true_ids)),
            ("nodes_trueleafs", Attr::Ints(&self.true_leafs)),
            ("nodes_falsenodeids", Attr::Ints(&self.false_ids)),
            ("nodes_falseleafs", Attr::Ints(&self.false_leafs)),
            ("nodes_missing_value_tracks_true", Attr::Ints(&self.missing_true)),
            ("leaf_targetids", Attr::Ints(&self.leaf_targets)),
            (
                "leaf_weights",
                Attr::Tensor(tensor("", &[self.leaf_weights.len() as i64], Values::Float(&self.leaf_weights))),
            ),
        ];
        if !self.members.is_empty() {
            let m = self.members.len() as i64;
            attrs.push(("membership_values", Attr::Tensor(tensor("", &[m], Values::Float(&self.members)))));
        }
        attrs
    }
}

impl Model {
    /// The model as an ONNX model (its serialised `ModelProto`), scoring as
    /// [`Model::predict`] does: see the module's documentation for the graph. Fails when a
    /// feature's name is one of the outputs' (`value`, `margin`) or two features share a name.
    pub fn to_onnx(&self) -> Result<Vec<u8>> {
        let k = self.n_outputs;
        let objective = self.objective();
        let mut g = Graph { nodes: Vec::new(), initializers: Vec::new(), n_values: 0 };
        let (inputs, x) = self.onnx_inputs(&mut g)?;
        let margin = self.onnx_margin(&mut g, &x);
        let (value, value_type) = onnx_value(&mut g, objective, &margin);
        // One output per row is a vector, as `predict` gives it; several are a matrix.
        let width = if objective.predicts_classes() { 1 } else { k };
        reshape_output(&mut g, &value, ONNX_OUTPUTS[0], width);
        reshape_output(&mut g, &margin, ONNX_OUTPUTS[1], k);
        let doc = format!("{} model of {} trees, {k} outputs", objective.name(), self.trees.len());
        let outputs = [(ONNX_OUTPUTS[0], value_type, width), (ONNX_OUTPUTS[1], FLOAT, k)];
        Ok(model_proto(graph_proto(g, &doc, &inputs, &outputs)).0)
    }

    /// The graph's inputs, one per feature (its name and element type), and the `[N, F]`
    /// matrix the trees read, each feature a column of it.
    fn onnx_inputs(&self, g: &mut Graph) -> Result<(Vec<(String, i64)>, String)> {
        let mut inputs = Vec::with_capacity(self.features.len());
        let mut columns = Vec::with_capacity(self.features.len());
        let column_shape = g.constant("column_shape", &[2], Values::Int64(&[-1, 1]));
        for (i, f) in self.features.iter().enumerate() {
            let name = if f.name.is_empty() { format!("f{i}") } else { f.name.clone() };
            if ONNX_OUTPUTS.contains(&name.as_str()) || name.starts_with("polars_gbt/") {
                return Err(Error::column(
                    &name,
                    "a feature of this name cannot be an input of the ONNX graph, whose outputs are `value` and \
                     `margin` (and values polars_gbt/...): train with the column renamed",
                ));
            }
            if inputs.iter().any(|(n, _)| *n == name) {
                return Err(Error::column(&name, "names two features; ONNX inputs need distinct names"));
            }
            let (codes, elem_type) = self.onnx_feature(g, &name, f);
            inputs.push((name, elem_type));
            columns.push(g.apply("Reshape", &[&codes, &column_shape], vec![]));
        }
        let column_refs: Vec<&str> = columns.iter().map(String::as_str).collect();
        let x = g.apply("Concat", &column_refs, vec![("axis", Attr::Int(1))]);
        Ok((inputs, x))
    }

    /// Feature `f`'s values as the trees read them, from its input `name`, and that input's
    /// element type: a category's code (names through a `LabelEncoder`, unseen -1), or a
    /// number, the missing-value sentinel read as NaN.
    fn onnx_feature(&self, g: &mut Graph, name: &str, f: &FeatureInfo) -> (String, i64) {
        match (&f.categories, f.cuts.is_categorical()) {
            (Some(categories), true) => {
                let codes: Vec<f32> = (0..categories.len()).map(|c| c as f32).collect();
                let out = g.fresh("codes");
                let attrs = vec![
                    ("keys_strings", Attr::Strings(categories)),
                    ("values_floats", Attr::Floats(&codes)),
                    ("default_float", Attr::Float(-1.0)),
                ];
                g.node("LabelEncoder", ML, &[name], &out, attrs);
                (out, STRING)
            }
            (_, is_categorical) => {
                let codes = match self.config.missing {
                    // The sentinel reads as missing in numeric columns, as `Model::bind` does.
                    Some(m) if !is_categorical => {
                        let sentinel = g.constant("missing", &[], Values::Float(&[m as f32]));
                        let nan = g.constant("nan", &[], Values::Float(&[f32::NAN]));
                        let is_missing = g.apply("Equal", &[name, &sentinel], vec![]);
                        g.apply("Where", &[&is_missing, &nan, name], vec![])
                    }
                    _ => name.to_string(),
                };
                (codes, FLOAT)
            }
        }
    }

    /// The margin `[N, k]` of the rows `x`: the trees' sums (one `TreeEnsemble`) plus the base
    /// margin.
    fn onnx_margin(&self, g: &mut Graph, x: &str) -> String {
        let k = self.n_outputs;
        let mut ensemble = Ensemble::default();
        for (t, tree) in self.trees.iter().enumerate() {
            ensemble.add(tree, t % k);
        }
        let sums = g.fresh("tree_sums");
        let attrs = ensemble.attributes(k);
        g.node("TreeEnsemble", ML, &[x], &sums, attrs);
        let base = g.constant("base_margin", &[k as i64], Values::Float(&self.base_margin));
        g.apply("Add", &[&sums, &base], vec![])
    }
}

/// What `predict` gives from `margin`, and its element type: the class (`ArgMax`), or the
/// margin through `objective`'s link.
fn onnx_value(g: &mut Graph, objective: Objective, margin: &str) -> (String, i64) {
    if objective.predicts_classes() {
        let argmax = vec![("axis", Attr::Int(1)), ("keepdims", Attr::Int(1))];
        return (g.apply("ArgMax", &[margin], argmax), INT64);
    }
    let value = match objective.link() {
        Link::Identity => g.apply("Identity", &[margin], vec![]),
        Link::Logistic => g.apply("Sigmoid", &[margin], vec![]),
        Link::Exp => g.apply("Exp", &[margin], vec![]),
        Link::Softmax => g.apply("Softmax", &[margin], vec![("axis", Attr::Int(1))]),
        Link::Hinge => {
            let zero = g.constant("zero", &[], Values::Float(&[0.0]));
            let positive = g.apply("Greater", &[margin, &zero], vec![]);
            g.apply("Cast", &[&positive], vec![("to", Attr::Int(FLOAT))])
        }
    };
    (value, FLOAT)
}

/// Output `to`: `from` reshaped to `[N]` (`w` 1) or `[N, w]`.
fn reshape_output(g: &mut Graph, from: &str, to: &str, w: usize) {
    let dims: Vec<i64> = if w == 1 { vec![-1] } else { vec![-1, w as i64] };
    let target = g.constant("output_shape", &[dims.len() as i64], Values::Int64(&dims));
    g.node("Reshape", "", &[from, &target], to, vec![]);
}

/// GraphProto: node 1, name 2, initializer 5, doc_string 10, input 11, output 12. Inputs are
/// `(name, element type)`, of shape `[N]`; outputs `(name, element type, width)`, of shape
/// `[N]` (width 1) or `[N, width]`.
fn graph_proto(g: Graph, doc: &str, inputs: &[(String, i64)], outputs: &[(&str, i64, usize)]) -> Proto {
    let shape = |w: usize| if w == 1 { vec![None] } else { vec![None, Some(w as i64)] };
    let mut graph = Proto::default();
    for n in g.nodes {
        graph.message(1, n);
    }
    graph.string(2, "polars_gbt");
    for t in g.initializers {
        graph.message(5, t);
    }
    graph.string(10, doc);
    for (name, ty) in inputs {
        graph.message(11, value_info(name, *ty, &[None]));
    }
    for &(name, ty, w) in outputs {
        graph.message(12, value_info(name, ty, &shape(w)));
    }
    graph
}

/// ModelProto: ir_version 1, producer_name 2, producer_version 3, graph 7, opset_import 8.
fn model_proto(graph: Proto) -> Proto {
    let mut model = Proto::default();
    model.int(1, IR_VERSION).string(2, "polars-gbt").string(3, env!("CARGO_PKG_VERSION")).message(7, graph);
    for (domain, version) in [("", ONNX_OPSET), (ML, ML_OPSET)] {
        let mut opset = Proto::default();
        opset.string(1, domain).int(2, version);
        model.message(8, opset);
    }
    model
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_fields_are_encoded_as_the_wire_format_says() {
        let mut p = Proto::default();
        // Field 1, varint 300: tag 0x08, then 0xAC 0x02.
        p.int(1, 300);
        assert_eq!(p.0, [0x08, 0xAC, 0x02]);
        // A negative int64 is ten bytes, two's complement.
        let mut p = Proto::default();
        p.int(3, -1);
        assert_eq!(p.0.len(), 11);
        assert_eq!(p.0[10], 0x01);
        // Field 2, a string: tag 0x12, length, bytes.
        let mut p = Proto::default();
        p.string(2, "ab");
        assert_eq!(p.0, [0x12, 2, b'a', b'b']);
        // Packed floats: tag, byte length, little-endian values.
        let mut p = Proto::default();
        p.packed_floats(4, &[1.0]);
        assert_eq!(p.0, [0x22, 4, 0, 0, 0x80, 0x3F]);
    }
}
