"""Index tables of the linear-regression sufficient statistics, shared by the release, its mechanism and
its sampler (pure bookkeeping over the number of features p; nothing here reads records).

u = (x_j x_k for j <= k, row-major; then x_j) are the covariate statistics; x~ = (x, 1) adds the
intercept, so P = p + 1 weights; the ``x4`` part holds every monomial of degree 3 and 4 in x.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np


@functools.lru_cache(maxsize=16)
def index_tables(p: int) -> dict[str, Any]:
    """Index tables for p features: u = (x_j x_k for j <= k, row-major; then x_j), P = p + 1."""
    pairs = [(j, k) for j in range(p) for k in range(j, p)]
    n_u = len(pairs) + p
    big_p = p + 1
    # u~ = (u, 1): entry a is x~_{i1(a)} x~_{i2(a)} with x~_p = 1.
    i1 = np.array([a for a, _ in pairs] + list(range(p)) + [p])
    i2 = np.array([b for _, b in pairs] + [p] * p + [p])
    # M(u~): P x P matrix gathered from u~.
    gather = np.zeros((big_p, big_p), np.int64)
    for a, (j, k) in enumerate(zip(i1, i2)):
        gather[j, k] = gather[k, j] = a
    return {"pairs": pairs, "n_u": n_u, "P": big_p, "i1": i1, "i2": i2, "gather": gather, "triu": np.triu_indices(p)}


@functools.lru_cache(maxsize=4)
def monomials(p: int) -> tuple[tuple[int, ...], ...]:
    """The degree-3 then degree-4 monomials of x (combinations_with_replacement order) of the ``x4`` part.
    Built only when that part is released or used (there are O(p^4) of them: 4.4 million at p = 100)."""
    return tuple(itertools.combinations_with_replacement(range(p), 3)) + tuple(
        itertools.combinations_with_replacement(range(p), 4)
    )


def num_latent_stats(p: int) -> int:
    """m, the number of released coordinates the sampler conditions on: the ``xx``, ``xy`` and ``yy`` parts."""
    return index_tables(p)["n_u"] + p + 2
