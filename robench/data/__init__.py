"""Task data: loading and validating splits, the built-in tasks, tasks from the user's files, data fingerprints."""
