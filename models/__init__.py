"""Built-in models and defenses; importing this package registers them."""
from robench.models import (
    bert,  # noqa: F401
    freelb,  # noqa: F401
    imbert,  # noqa: F401
    smart,  # noqa: F401
)
