"""The bottom layer: plain types, errors, hyperparameter checks, the registries, paths, hashing, atomic files,
device, locks and progress bars. Imports nothing else of robench."""
