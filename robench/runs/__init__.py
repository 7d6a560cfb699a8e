"""One run: the spec, presets, resolution and validation, the runner, `evaluate`, the estimate and the store (the
only reader and writer of run files)."""
