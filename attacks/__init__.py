"""Built-in attack recipes; importing this package registers them."""
from robench.attacks import (  # noqa: F401
    advglue,
    bert_attack,
    gradient_swap,
    textattack,
    textfooler,
    transfer,
)
