"""Built-in models and defenses; importing this package registers them."""
from robench.models import bert  # noqa: F401
from robench.models import imbert  # noqa: F401
from robench.models import freelb  # noqa: F401
from robench.models import smart  # noqa: F401
