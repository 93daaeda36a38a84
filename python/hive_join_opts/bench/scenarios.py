"""Imports every scenario module, which registers its scenarios. Each rule's module is named
after the rule."""

from . import no_candidates  # noqa: F401

# skew join
from . import skew_join_split  # noqa: F401,E402

# map-join pruning
from . import join_key_value_pushdown  # noqa: F401,E402

# correlation
from . import aggregate_join_to_window  # noqa: F401,E402
from . import coarsen_join_shuffle  # noqa: F401,E402
from . import group_by_cast_join_key  # noqa: F401,E402
from . import merge_same_key_aggregates  # noqa: F401,E402
from . import prune_repeated_in_subquery  # noqa: F401,E402
