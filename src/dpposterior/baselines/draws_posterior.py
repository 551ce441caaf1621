"""A posterior given by plain draws of theta (e.g. from a Gibbs sampler), the sibling of
:class:`dpposterior.releases.posterior.Posterior` (a mixture of variational Gaussians).

Post-processing only: built from a release's sampler output, it never sees data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from .._checks import check_real
from ..releases.posterior import _check_num, _key, _model_keywords, _summary_table, draws_to_arviz, run_predictive
from ..releases.summary import PosteriorSummary, summary_rows
from ..privacy.spent import PrivacySpent
from ..releases.layout import ParamLayout


@dataclasses.dataclass(frozen=True, eq=False)
class DrawsPosterior:
    """An approximate posterior represented by M draws of theta in the model's unconstrained space.

    It offers the public methods of :class:`~dpposterior.releases.posterior.Posterior`
    (``sample``, ``sample_unconstrained``, ``mean``, ``mean_unconstrained``, ``sd_unconstrained``,
    ``summary``, ``predictive``, ``to_arviz``, ``privacy``). ``sample`` resamples the stored draws
    with replacement: it cannot produce more distinct values than were stored.

    Attributes:
      layout: the model's latent sites (names, shapes, supports); the unconstrained maps are those of
        the NumPyro model, so draws are comparable with NA-DPVI's.
      draws: (M, n) float32 draws of theta in the unconstrained space (after warm-up and thinning).
      privacy: the PrivacySpent of the release the draws were computed from.
      method: how the draws were obtained (e.g. ``"bernstein_sheldon_gibbs"``).
      diagnostics: post-processing diagnostics (functions of the release only).
    """

    layout: ParamLayout
    draws: Any
    privacy: PrivacySpent
    method: str
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.privacy, PrivacySpent):  # every release carries what it cost
            raise TypeError(
                f"privacy must be the PrivacySpent of the release the draws were computed from, got "
                f"{type(self.privacy).__name__}"
            )
        if not isinstance(self.layout, ParamLayout):
            raise TypeError(f"layout must be a ParamLayout, got {type(self.layout).__name__}")
        d = jnp.asarray(self.draws, jnp.float32)
        if d.ndim != 2 or d.shape[1] != self.layout.num_latent or d.shape[0] < 1:
            raise ValueError(
                f"draws must have shape (M >= 1, {self.layout.num_latent}) for this layout, "
                f"got {tuple(jnp.shape(self.draws))}"
            )
        if not bool(jnp.all(jnp.isfinite(d))):
            raise ValueError("draws must be finite")
        object.__setattr__(self, "draws", d)

    @property
    def num_latent(self) -> int:
        """n, the number of latent coordinates (unconstrained)."""
        return self.layout.num_latent

    @property
    def num_draws(self) -> int:
        """The number of stored draws."""
        return int(self.draws.shape[0])

    def sample_unconstrained(self, key: Any, num_samples: int) -> jax.Array:
        """(num_samples, n) draws of theta in the unconstrained space (resampled with replacement)."""
        _check_num(num_samples)
        idx = jax.random.randint(_key(key), (num_samples,), 0, self.num_draws)
        return self.draws[idx]

    def sample(self, key: Any, num_samples: int) -> dict[str, jax.Array]:
        """Draws of the constrained values, one array (num_samples, *site shape) per latent site."""
        return self.layout.constrain(self.sample_unconstrained(key, num_samples))

    def constrained_draws(self) -> dict[str, jax.Array]:
        """All stored draws, mapped to the constrained values (no resampling)."""
        return self.layout.constrain(self.draws)

    def mean_unconstrained(self) -> jax.Array:
        """Posterior mean of theta in the unconstrained space (over the stored draws)."""
        return jnp.mean(self.draws, axis=0)

    def sd_unconstrained(self) -> jax.Array:
        """Posterior sd of theta in the unconstrained space (over the stored draws)."""
        return jnp.std(self.draws, axis=0)

    def mean(self, key: Any = None, num_samples: int | None = None) -> dict[str, jax.Array]:
        """Posterior means of the constrained values over the stored draws (``key``/``num_samples``
        are accepted for compatibility with :class:`Posterior` and ignored)."""
        return {k: jnp.mean(v, axis=0) for k, v in self.constrained_draws().items()}

    @property
    def warnings(self) -> tuple[str, ...]:
        """What post-processing warned about (``diagnostics["warnings"]``), as :attr:`Posterior.warnings`."""
        return tuple(self.diagnostics.get("warnings", ()))

    def summary(self, key: Any = None, num_samples: int | None = None, prob: float = 0.9) -> PosteriorSummary:
        """Rows (one per constrained scalar) with mean, sd, robust sd and the central ``prob`` interval of the
        stored draws (``key``/``num_samples`` ignored: every stored draw is used), with this posterior's
        :attr:`warnings` attached; each ``parameter`` named as ArviZ names it, as :meth:`Posterior.summary`."""
        if not 0 < check_real("prob", prob) < 1:
            raise ValueError(f"prob must lie in (0, 1), got {prob!r}")
        return summary_rows(self.constrained_draws(), self.layout, prob, self.num_draws, self.warnings)

    def predictive(
        self,
        key: Any,
        model: Callable,
        *new_data: Any,
        num_samples: int | None = None,
        model_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, jax.Array]:
        """Posterior predictive draws of the model's observed (and deterministic) sites at public
        ``new_data``; arguments as :meth:`Posterior.predictive`.

        Raises:
          ValueError: ``model`` lacks a latent site of this posterior, or has a global latent site that
            the posterior does not hold (not the model that was fitted), as :meth:`Posterior.predictive`.
        """
        kw = _model_keywords(model, model_kwargs, kwargs, num_samples_given=num_samples is not None)
        k1, k2 = jax.random.split(_key(key))
        return run_predictive(
            self.layout, self.sample(k1, 1000 if num_samples is None else num_samples), k2, model, new_data, kw
        )

    def to_arviz(
        self,
        key: Any = None,
        num_samples: int | None = None,
        *,
        num_chains: int = 4,
        coords: dict[str, Any] | None = None,
        dims: dict[str, Any] | None = None,
    ):
        """An ArviZ InferenceData of the stored constrained draws, privacy record in its attributes.

        The stored draws (one sampler run's, in order) are split into ``num_chains`` consecutive blocks,
        ArviZ's chains, so that R-hat compares the run's parts as split R-hat does. When the number of
        stored draws M is not a multiple of ``num_chains``, the first M mod ``num_chains`` draws (fewer
        than ``num_chains``, the ones nearest the warm-up) are left out, and the attribute
        ``draws_left_out`` says how many. ``coords``, ``dims``, the attributes and the errors are those
        of :meth:`Posterior.to_arviz <dpposterior.noise_aware.Posterior.to_arviz>`; ``key`` and
        ``num_samples`` are accepted for compatibility with it and ignored. The variables keep the
        model's order of the latent sites (ArviZ's ``from_dict`` sorts them)."""
        from .._checks import check_positive_int

        c = check_positive_int(num_chains, "num_chains")
        if c > self.num_draws:
            raise ValueError(f"num_chains={c} is more than the {self.num_draws} stored draws")
        left_out = self.num_draws % c
        draws = {k: v[left_out:] for k, v in self.constrained_draws().items()}
        idata = draws_to_arviz(
            draws, self.method, self.privacy, num_chains=c, coords=coords, dims=dims, chains="blocks"
        )
        for attrs in (idata.attrs, idata.posterior.attrs):
            attrs["draws_left_out"] = left_out
        return idata

    def summary_table(self, key: Any = None, num_samples: int | None = None, prob: float = 0.9):
        """ArviZ's summary table (mean, sd, HDI at ``prob``) of the stored draws, privacy in ``.attrs``."""
        return _summary_table(self.to_arviz(num_chains=1), self.privacy, prob)
