"""DP PAC-Bayes risk certificates with private data-dependent priors (Entropy-SGLD).

Reference: Dziugaite & Roy, "Data-dependent PAC-Bayes priors via differential privacy" (2018); Dziugaite,
"Revisiting generalization for deep learning: PAC-Bayes, flat minima, and generative models" (PhD thesis,
2019).

    from dpposterior import pacbayes as pb
    pb.kl_inv_upper(0.05, 0.01)                          # largest p with kl(0.05 || p) <= 0.01
    pb.dp_prior_pacbayes_bound(0.05, kl_divergence=800.0, m=12_214, delta=0.05, epsilon=0.07)
    pb.local_entropy_gibbs_epsilon(beta=1.0, loss_range=4.0, tau=60_000 ** 0.5, m=60_000)  # 0.0327
"""

from . import entropy_sgld
from .bounds import c_bound
from .bounds import dp_prior_kl_rhs
from .bounds import dp_prior_pacbayes_bound
from .bounds import gaussian_kl
from .bounds import h_bound
from .bounds import local_entropy_gibbs_epsilon
from .bounds import mc_kl_rhs
from .bounds import mc_risk_upper
from .bounds import oneto_epsilon_bar
from .bounds import seeger_bound
from .bounds import seeger_kl_rhs
from .certificate import PacBayesCertificate
from .certificate import certify
from .certificate import certify_gaussian
from .certificate import sample_gaussian_errors
from .entropy_sgld import GIBBS_SAMPLE_CAVEAT
from .entropy_sgld import EntropySGLDInfo
from .entropy_sgld import EntropySGLDKernel
from .entropy_sgld import EntropySGLDParams
from .entropy_sgld import EntropySGLDState
from .entropy_sgld import beta_for_epsilon
from .entropy_sgld import bounded_cross_entropy
from .entropy_sgld import check_labels
from .entropy_sgld import classifier_error
from .entropy_sgld import classifier_loss
from .entropy_sgld import entropy_sgld_privacy
from .kl import kl
from .kl import kl_inv_lower
from .kl import kl_inv_upper

__all__ = [
    "GIBBS_SAMPLE_CAVEAT",
    "EntropySGLDInfo",
    "EntropySGLDKernel",
    "EntropySGLDParams",
    "EntropySGLDState",
    "PacBayesCertificate",
    "beta_for_epsilon",
    "bounded_cross_entropy",
    "c_bound",
    "certify",
    "certify_gaussian",
    "check_labels",
    "classifier_error",
    "classifier_loss",
    "dp_prior_kl_rhs",
    "dp_prior_pacbayes_bound",
    "entropy_sgld",
    "entropy_sgld_privacy",
    "gaussian_kl",
    "h_bound",
    "kl",
    "kl_inv_lower",
    "kl_inv_upper",
    "local_entropy_gibbs_epsilon",
    "mc_kl_rhs",
    "mc_risk_upper",
    "oneto_epsilon_bar",
    "sample_gaussian_errors",
    "seeger_bound",
    "seeger_kl_rhs",
]
