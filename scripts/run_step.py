"""The `script:` of every rule: runs the rule's step (deploybench.steps.run)."""

from deploybench.steps import run

run(snakemake)  # noqa: F821 (Snakemake defines it in the script's preamble)
