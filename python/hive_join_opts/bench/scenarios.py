"""Imports every scenario module, which registers its scenarios. Each rule's module is named
after the rule."""

from . import no_candidates  # noqa: F401

# skew join

# map-join pruning
from . import join_key_value_pushdown  # noqa: F401,E402

# correlation
