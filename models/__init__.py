"""Built-in models and defenses, one module each; a module is imported (and registers its entry) when its name
is first looked up (`robench.core.registry`)."""

LAZY = {name: f"robench.models.{name}" for name in ("a2t", "ascc", "bert", "freelb", "imbert", "pgd", "safer", "smart")}
