"""deploybench: the step logic of the Triton deployment benchmark pipeline."""
