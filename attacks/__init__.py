"""Built-in attack recipes; importing this package registers them."""
from robench.attacks import (  # noqa: F401
    advglue,  # noqa: F401
    bert_attack,
    textattack_backend,  # noqa: F401
    textfooler,
)
