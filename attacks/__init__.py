"""Built-in attack recipes, one module each; a module is imported (and registers its entries) when one of its
names is first looked up (`robench.core.registry`). `tests/test_registry.py` checks this table against what the
modules register."""

TEXTATTACK = ("textfooler", "bert-attack", "bae", "pwws", "textbugger", "deepwordbug", "pruthi", "iga",
              "input-reduction")  # textattack.recipes.SPECS
LAZY = {
    "advglue": "robench.attacks.advglue",
    "bert-attack": "robench.attacks.bert_attack",
    "gradient-swap": "robench.attacks.gradient_swap",
    "textfooler": "robench.attacks.textfooler",
    **{f"textattack:{name}": "robench.attacks.textattack" for name in TEXTATTACK},
}
FAMILIES = ("robench.attacks.transfer",)  # transfer:RUN_ID
