"""Built-in models and defenses; importing this package registers them."""
from robench.models import bert  # noqa: F401
