"""The papers' models as NumPyro models, with simulators and the reference DP-SGD settings."""

from .conjugate import beta_bernoulli
from .conjugate import dirichlet_categorical
from .conjugate import gamma_exponential
from .registry import MODELS
from .registry import ModelSpec
from .registry import get_model
from .registry import model_fingerprint
from .registry import register_model
from .regression import linear_regression
from .regression import logistic_regression

__all__ = [
    "MODELS",
    "ModelSpec",
    "beta_bernoulli",
    "dirichlet_categorical",
    "gamma_exponential",
    "get_model",
    "linear_regression",
    "logistic_regression",
    "model_fingerprint",
    "register_model",
]
