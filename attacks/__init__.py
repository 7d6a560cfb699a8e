"""Built-in attack recipes; importing this package registers them."""
from robench.attacks import advglue  # noqa: F401
