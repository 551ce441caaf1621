"""DP PAC-Bayes risk certificates with private data-dependent priors (Entropy-SGLD).

Reference: Dziugaite & Roy, "Data-dependent PAC-Bayes priors via differential privacy" (2018); Dziugaite,
"Revisiting generalization for deep learning: PAC-Bayes, flat minima, and generative models" (PhD thesis,
2019).

    from dpposterior import pacbayes as pb
    pb.kl_inv_upper(0.05, 0.01)                          # largest p with kl(0.05 || p) <= 0.01
    pb.dp_prior_pacbayes_bound(0.05, kl_divergence=800.0, m=12_214, delta=0.05, epsilon=0.07)
    pb.local_entropy_gibbs_epsilon(beta=1.0, loss_range=4.0, tau=60_000 ** 0.5, m=60_000)  # 0.0327

Public API: the certificates, the kl inverses and the bounds a user composes; Entropy-SGLD is the module
:mod:`.entropy_sgld` (its kernel, privacy and losses); the bounds' right-hand sides stay in ``bounds``.
"""

from . import entropy_sgld
from .bounds import c_bound
from .bounds import dp_prior_pacbayes_bound
from .bounds import gaussian_kl
from .bounds import h_bound
from .bounds import local_entropy_gibbs_epsilon
from .bounds import seeger_bound
from .certificate import PacBayesCertificate
from .certificate import certify
from .certificate import certify_gaussian
from .kl import kl
from .kl import kl_inv_lower
from .kl import kl_inv_upper

__all__ = [
    "PacBayesCertificate",
    "c_bound",
    "certify",
    "certify_gaussian",
    "dp_prior_pacbayes_bound",
    "entropy_sgld",
    "gaussian_kl",
    "h_bound",
    "kl",
    "kl_inv_lower",
    "kl_inv_upper",
    "local_entropy_gibbs_epsilon",
    "seeger_bound",
]
