"""Recommender ensembles (backend keys `hps-*`): reference 003's Merlin HPS + dense
deployment, built from the pipeline's own parts.

A model whose config has an `ensemble` section (DLRM, DCNv2) deploys as a Triton
ensemble of two models:
- `<model>-sparse`: embedding lookups over hierarchical storage (all rows in a
  memory-mapped host file, the most frequent rows cached on the device;
  runners.embeddings, served by served/sparse_model.py), `sparse_input` -> `lookup`;
- `<model>-dense`: the network without its embedding tables, exported (`dense-onnx`,
  `dense-savedmodel`) and converted like any model, served as the backend key `dense` of
  the ensemble backend serves a model (onnx, trt, tf-savedmodel);
wired by the ensemble's input/output maps, so clients send what the single model takes.

    parts       the two parts of a run: names, tensors, the dense part's run
    artifact    the sparse export, the converted ensemble, its in-process runner
    repository  the ensemble in a Triton model repository
    hps         ... with a real Merlin HPS backend as its sparse model
    metrics     the sparse model's hit-rate counters
"""
