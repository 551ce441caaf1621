"""Entropy-SGLD's (epsilon, 0)-DP holds only for an exact Gibbs sample: its record says so in its
summary, and a Ledger total that composes it keeps the caveat."""

from __future__ import annotations

import math

from dpposterior.pacbayes import entropy_sgld as es
from dpposterior.privacy import Ledger, PrivacySpent


def _prior_record():
    params = es.EntropySGLDParams(tau=math.sqrt(600), gamma=1.0, eta=0.1, eta_inner=0.01, beta=1.0)
    return es.entropy_sgld_privacy(params, 600, num_steps=10)


def test_the_record_states_that_its_guarantee_is_conditional():
    record = _prior_record()
    assert record.is_private and record.caveat == es.GIBBS_SAMPLE_CAVEAT
    assert record.summary().startswith(
        "CONDITIONAL (holds only if the caveat does: epsilon = 2 beta L_max tau / m holds for one EXACT sample"
    )


def test_a_ledger_total_keeps_the_caveat_of_its_parts():
    book = Ledger()
    book.add(_prior_record(), "entropy-sgld prior")
    book.add(
        PrivacySpent(epsilon=0.5, delta=0.0, neighbouring="replace_one", accountant="pure", mechanism="laplace"),
        "a Laplace count",
    )
    total = book.total(1e-6)
    assert total.caveat == f"entropy-sgld prior: {es.GIBBS_SAMPLE_CAVEAT}"
    assert total.summary().startswith("CONDITIONAL")
    plain = Ledger()
    plain.add(PrivacySpent(epsilon=0.5, delta=0.0, neighbouring="replace_one", accountant="pure", mechanism="laplace"))
    assert plain.total(1e-6).caveat == "" and not plain.total(1e-6).summary().startswith("CONDITIONAL")
