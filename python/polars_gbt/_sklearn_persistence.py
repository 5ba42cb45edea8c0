"""The scikit-learn estimators' ``save_model`` / ``load_model``: XGBoost's JSON and UBJSON
model files and polars-gbt's, with the estimator's attributes (classes, feature names)
stored beside the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from polars_gbt import _ubjson
from polars_gbt._model import Model


class _PersistenceMixin:
    """``save_model`` and ``load_model`` of the estimators (``_GBTBase``, whose
    ``get_booster`` they read)."""

    def save_model(self, fname: str | Path) -> None:
        """Writes the fitted estimator to ``fname``, as XGBoost's ``save_model``. A path ending
        in ``.json`` is XGBoost's JSON model (``xgboost``'s estimators and ``Booster`` load it,
        XGBoost 3.1 or later), with the scikit-learn attributes in its ``scikit_learn``
        attribute as XGBoost writes them; ``.ubj`` is the same in UBJSON. Any other path is
        polars-gbt's JSON model with those attributes beside it (``polars_gbt.Model.load``
        reads the model). ``load_model`` reads any of them back."""
        check_is_fitted(self, "model_")
        meta = {"_estimator_type": _estimator_type(self), "n_features_in_": int(self.n_features_in_)}
        if hasattr(self, "feature_names_in_"):
            meta["feature_names_in_"] = [str(n) for n in self.feature_names_in_]
        if hasattr(self, "classes_"):
            meta["classes_"] = _saved_classes(self.classes_)
        if getattr(self, "n_labels_", None):
            meta["n_labels_"] = int(self.n_labels_)
        meta["objective_"] = self.objective_ if isinstance(self.objective_, str) else None
        suffix = Path(fname).suffix.lower()
        if suffix in (".json", ".ubj"):
            doc = json.loads(self.get_booster().to_xgboost_json())
            doc["learner"].setdefault("attributes", {})["scikit_learn"] = json.dumps(meta)
            if not hasattr(self, "feature_names_in_"):
                # Fitted without names (f0, f1, ... are ours): none, as XGBoost's models of
                # arrays have none, so that XGBoost scores arrays with it.
                doc["learner"]["feature_names"] = []
                doc["learner"]["feature_types"] = []
            data = json.dumps(doc).encode() if suffix == ".json" else _ubjson.dumps(doc)
        else:
            doc = json.loads(self.get_booster().to_json())
            doc["scikit_learn"] = meta
            data = json.dumps(doc).encode()
        Path(fname).write_bytes(data)

    def load_model(self, fname: str | Path | bytes | bytearray) -> None:
        """Reads a model written by ``save_model`` (or by XGBoost's estimators and
        ``Booster.save_model``, JSON or UBJSON, or ``polars_gbt.Model.save``) into this
        estimator, as XGBoost's ``load_model``: ``predict`` then works, and ``classes_``,
        ``n_features_in_``, ``feature_names_in_`` (where the model was fitted on named
        columns), ``objective_`` and ``objective`` are restored. A model without the
        estimator's attributes (XGBoost's own, a bare ``Model``) takes its classes as
        ``0 .. n_classes - 1``, as XGBoost does. The other constructor parameters are left
        as they are."""
        data = bytes(fname) if isinstance(fname, (bytes, bytearray)) else Path(fname).read_bytes()
        meta: dict[str, Any] | None = None
        doc = _ubjson.document(data)
        if doc is None:  # polars-gbt's binary format
            model = Model.from_bytes(data)
        elif "learner" in doc:  # XGBoost's JSON or UBJSON
            stored = (doc["learner"].get("attributes") or {}).get("scikit_learn")
            meta = json.loads(stored) if stored else None
            model = Model.from_xgboost(data)
        else:  # polars-gbt's JSON, with save_model's attributes beside the model
            meta = doc.pop("scikit_learn", None)
            model = Model.from_json(json.dumps(doc))
        kind = (meta or {}).get("_estimator_type")
        if kind is not None and kind != _estimator_type(self):
            raise TypeError(f"Loading an estimator with different type. Expecting: {_estimator_type(self)}, got: {kind}")
        self._set_fitted(model, meta or {})

    def _set_fitted(self, model: Model, meta: dict[str, Any]) -> None:
        """The fitted attributes of ``model`` and the saved attributes ``meta``."""
        self.model_ = model.to_bytes()
        self.evals_result_ = None
        self.objective_ = meta.get("objective_") or model.params.get("objective") or getattr(self, "objective_", None)
        if isinstance(self.objective_, str):
            self.objective = self.objective_
        names = meta.get("feature_names_in_")
        self.n_features_in_ = int(meta.get("n_features_in_", len(model.feature_names)))
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif "n_features_in_" not in meta and model.feature_names != [f"f{i}" for i in range(self.n_features_in_)]:
            self.feature_names_in_ = np.asarray(model.feature_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        if isinstance(self, ClassifierMixin):
            classes = meta.get("classes_")
            if classes is None:
                k = model.params.get("num_class") or 0
                classes = list(range(k if k > 2 else 2))
            self.classes_ = np.asarray(classes)
            self.n_classes_ = len(self.classes_)
            # A multi-label fit: one binary output per label (XGBoost's have num_target).
            targets = model.params.get("num_target") or 1
            self.n_labels_ = meta.get("n_labels_") or (targets if targets > 1 else None)


def _estimator_type(estimator: Any) -> str:
    """XGBoost's name of the estimator's kind, which its saved models record."""
    from polars_gbt.sklearn import GBTRanker  # not at the top: sklearn.py imports this module

    if isinstance(estimator, GBTRanker):
        return "ranker"
    return "classifier" if isinstance(estimator, ClassifierMixin) else "regressor"


def _saved_classes(classes: np.ndarray) -> list[Any]:
    """Classes as JSON values (numbers, strings, booleans)."""
    return [c.item() if isinstance(c, np.generic) else c for c in classes.tolist()]
