"""The FP32 source model every comparison starts from (`model`: built from its plug-in,
its weights, its evaluation set) and its Keras exports (`keras_export`)."""
