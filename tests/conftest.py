"""Settings shared by the whole test suite.

Hypothesis runs a modest number of examples by default so that `make test` stays fast on a
2-core machine; set HYPOTHESIS_PROFILE=thorough for a longer hunt. Deadlines are off because a
shared CI core makes single-example timings meaningless.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", max_examples=50, deadline=None)
settings.register_profile("thorough", max_examples=1_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
