"""The FP16 export planned for BERT's GPU keys only (the real Snakemake, a dry run)."""

import re


# the real Snakemake, a dry run
def test_dry_run_plans_the_fp16_export_for_bert_gpu_keys_only(tmp_path):
    from testkit.workflow import snakemake

    targets = {"h100/trt_fp16": "model.plan", "a30/onnx_fp16": "model.onnx",
               "h100/ts-trace_fp16": "model.pt", "h100/ts-trace-cg_fp16": "model.pt",
               "h100/onnx_fp32": "model.onnx", "cpu/onnx_fp32": "model.onnx"}
    result = snakemake(tmp_path, "-n", *(f"results/bert-tiny/{c}/converted/{f}"
                                         for c, f in targets.items()))
    exports = set(re.findall(r"output: (results/bert-tiny/export/\S+)", result.stdout))
    assert exports == {f"results/bert-tiny/export/{f}" for f in (
        "onnx/model.onnx", "onnx-fp16/model.onnx", "ts-trace/model.pt", "ts-trace-fp16/model.pt")}
    # which export each conversion reads (Snakemake's reason names its input)
    jobs = result.stdout.split("\nrule ")
    inputs = {re.search(r"output: results/bert-tiny/(\S+)/converted/", j).group(1):
              re.search(r"input: (\S+)", j).group(1) for j in jobs if j.startswith("convert:")}
    assert inputs == {
        "h100/trt_fp16": "results/bert-tiny/export/onnx-fp16/model.onnx",
        "a30/onnx_fp16": "results/bert-tiny/export/onnx-fp16/model.onnx",
        "h100/ts-trace_fp16": "results/bert-tiny/export/ts-trace-fp16/model.pt",
        "h100/ts-trace-cg_fp16": "results/bert-tiny/export/ts-trace/model.pt",
        "h100/onnx_fp32": "results/bert-tiny/export/onnx/model.onnx",
        "cpu/onnx_fp32": "results/bert-tiny/export/onnx/model.onnx"}
