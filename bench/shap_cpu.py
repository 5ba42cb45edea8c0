"""SHAP values on the CPU, ours against XGBoost's `pred_contribs` on the same model: an XGBoost
model (100 trees of depth 6, binary logistic) fit on 20,000 rows x 20 float32 features,
imported with `Model.from_xgboost`, then both libraries' SHAP values of the same rows, each
timed once after a warm-up run.

Usage: .venv/bin/python bench/shap_cpu.py   (xgboost-cpu from tests/python/requirements.txt)
Prints the two times; asserts nothing.
"""
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import xgboost as xgb

import polars_gbt

rng=np.random.default_rng(0); n=20000; nf=20
X=rng.normal(size=(n,nf)).astype(np.float32); y=(X[:,0]+X[:,1]*X[:,2]+rng.normal(size=n)>0).astype(np.float32)
feats=[f"f{j}" for j in range(nf)]
df=pl.DataFrame({f:X[:,j] for j,f in enumerate(feats)})
b=xgb.train({"objective":"binary:logistic","max_depth":6,"eta":0.1,"nthread":2},xgb.DMatrix(X,label=y,feature_names=feats),100)
path = Path(tempfile.mkdtemp()) / "model.json"
b.save_model(path)
m = polars_gbt.Model.from_xgboost(path)
d=xgb.DMatrix(X,feature_names=feats)
for name,f in [("ours",lambda: m.predict(df,output="contrib")),("xgboost",lambda: b.predict(d,pred_contribs=True))]:
    f(); t=time.perf_counter(); f(); print(name, round(time.perf_counter()-t,3),"s")
