"""Imports every scenario module, which registers its scenarios. Each rule's module is named
after the rule."""

from . import no_candidates  # noqa: F401

# skew join
from . import skew_join_split  # noqa: F401,E402

# map-join pruning

# correlation
