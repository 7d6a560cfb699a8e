"""Built-in models and defenses; importing this package registers them."""
from robench.models import (
    a2t,  # noqa: F401
    ascc,  # noqa: F401
    bert,  # noqa: F401
    freelb,  # noqa: F401
    imbert,  # noqa: F401
    pgd,  # noqa: F401
    safer,  # noqa: F401
    smart,  # noqa: F401
)
