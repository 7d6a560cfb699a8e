"""Built-in attack recipes; importing this package registers them."""
from robench.attacks import advglue  # noqa: F401
from robench.attacks import textattack_backend  # noqa: F401
from robench.attacks import bert_attack, textfooler  # noqa: F401
