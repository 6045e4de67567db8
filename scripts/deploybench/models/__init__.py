"""Model plug-ins (see deploybench.plugins for the API each module provides)."""
