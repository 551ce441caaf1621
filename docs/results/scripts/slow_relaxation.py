"""Why a release can miss silently when its trace relaxes slowly: traces simulated from NA-DPVI's own
gradient model (Räisä, Jälkö & Honkela, "Noise-aware differentially private variational inference",
2024, eq. 10), so the post-processing model is exactly right and only the relaxation time matters.

One coordinate, g~_t = q a (phi_t - phi*) + e_t with e_t ~ N(0, (sigma C / beta)^2) and
phi_{t+1} = phi_t - eta g~_t, started 3 stationary sds from phi* (a pilot's end), T = 10,000 steps,
burn-in 0.2 (window W = 8,000). The learning rate sets the relaxation time tau = 1 / (eta q a) as a share
of W. For each tau / W and each h prior scale (the default's sd_j times a factor), it prints:

- m/A: the mean of the fitted slope m (the h prior's location) over the true a; least squares on a
  near-unit-root autoregression reads the restoring force too steep by about 4 / (eta q W) on average
  (Kendall, "Note on bias in the estimation of autocorrelation", 1954), i.e. a relative 4 tau / W;
- the 90% coverage of phi* by the grid posterior over all traces, over the traces the identifiability
  rule passes (no UnidentifiedLatentsWarning: "silent") and over those it flags ("warned");
- the median 90% width over the width with a known a, 2 * 1.645 * sigma C / (beta q a sqrt(W));
- with the default h prior, the share of traces a stricter rule would leave silent (relaxation time at
  the slope's lower bound within f W instead of W) and their coverage.

    PYTHONPATH=src python docs/results/scripts/slow_relaxation.py [--traces 1000] [--kendall]

``--kendall`` instead prints, per tau / W, the same coverage and width with the default h prior's
location moved down by Kendall's bias of the slope, (1 + 3 r) / (eta q n) with r = 1 - eta q m.

``--identity`` instead prints, per tau / W, three figures that the linear gradient model ties to one
number, z = sqrt(W / (2 tau)): the median of the slope over its standard error (m / se, the
identifiability rule's statistic), the median of the trace's spread sqrt(Sxx / W) over the posterior sd
of phi* with a known a (sigma C / (beta q a sqrt(W))), and the mean of m / a against 1 + 2 / z^2.

A non-private experiment: nothing here is released.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from dpposterior.noise_aware import grid as G
from dpposterior.noise_aware import identify as I
from dpposterior.noise_aware import model as M
from dpposterior.noise_aware.simulate import simulate_trace_arrays
from dpposterior.noise_aware.stats import sufficient_statistics_jnp

T, Q, A, NOISE_SD = 10_000, 0.1, 100.0, 50.0
START = T // 5
W = T - START
SHARES = (0.01, 0.03, 0.1, 0.3)
FACTORS = (1.0, 2.0, 3.0, 100.0)
STRICTER = (1.0, 0.1, 0.05)


def traces(share: float, num: int, seed: int = 1):
    """(statistics after burn-in, learning rate) of ``num`` simulated traces with tau = share * W."""
    kappa = 1.0 / (share * W)
    lr = kappa / (Q * A)
    stationary_sd = lr * NOISE_SD / np.sqrt(2.0 * kappa)
    keys = jax.random.split(jax.random.PRNGKey(seed), num)
    start = jnp.full((num, 1), 3.0 * stationary_sd, jnp.float32)
    sim = jax.vmap(lambda k, s: simulate_trace_arrays(k, jnp.zeros(1), A, NOISE_SD, lr, s, T, Q))
    phi, g, _ = sim(keys, start)
    stats = jax.vmap(lambda p, gg: sufficient_statistics_jnp(p, gg, START))(phi, g)
    return stats, lr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", type=int, default=1000)
    ap.add_argument("--kendall", action="store_true", help="the h prior centred on the Kendall-corrected slope")
    ap.add_argument("--identity", action="store_true", help="slope z, wander and slope bias against sqrt(W / 2 tau)")
    args = ap.parse_args()
    num = args.traces
    known_width = 2 * 1.645 * NOISE_SD / (Q * A * np.sqrt(W))
    if args.identity:
        identity(num)
        return
    if args.kendall:
        kendall(num, known_width)
        return
    print(f"{'tau/W':>6} {'m/A':>5} {'silent':>6} | h prior sd x factor: 90% coverage all / silent / warned, width")
    stricter = []
    for share in SHARES:
        stats, lr = traces(share, num)
        noise = jnp.full((num, 1), NOISE_SD, jnp.float32)
        base = M.trace_priors(stats, noise, Q)
        ident = I.identifiability(stats, np.full((num, 1), NOISE_SD), Q, lr)
        silent = ~np.asarray(ident.coordinate_fails).ravel()
        ratio = np.asarray(ident.slope).ravel() / A
        cells, rule = [], []
        for factor in FACTORS:
            post = G.grid_posterior(stats, base._replace(h_scale=base.h_scale * factor), noise, Q)
            lo, hi = np.asarray(G.grid_phi_star_quantiles(post, [0.05, 0.95])).reshape(2, num)
            inside = (lo <= 0.0) & (hi >= 0.0)
            parts = [f"{inside[s].mean():.2f}" if s.any() else "-" for s in (np.ones_like(silent), silent, ~silent)]
            cells.append(f"x{factor:g}: {' / '.join(parts)}, {np.median(hi - lo) / known_width:.1f}")
            if factor == 1.0:
                for f in STRICTER:
                    sel = np.asarray(ident.relaxation_steps).ravel() <= f * W
                    rule.append(
                        f"f {f:g}: {sel.mean():.2f}, {inside[sel].mean():.2f}" if sel.any() else f"f {f:g}: 0, -"
                    )
        stricter.append(f"{share:>6g} | " + " | ".join(rule))
        print(f"{share:>6g} {ratio.mean():>5.2f} {silent.mean():>6.2f} | " + " | ".join(cells), flush=True)
    print(f"{'tau/W':>6} | default h prior, silent under the rule with window f W: share silent, their 90% coverage")
    print("\n".join(stricter))


def identity(num: int) -> None:
    """Per tau / W: z = sqrt(W / 2 tau) beside the slope's z, the wander in posterior sds and m / a."""
    print(f"{'tau/W':>6} {'z':>5} | {'median m/se':>11} {'median wander/sd':>16} | {'mean m/a':>8} {'1+2/z^2':>7}")
    post_sd = NOISE_SD / (Q * A * np.sqrt(W))  # phi*'s posterior sd with a known
    for share in SHARES:
        stats, _ = traces(share, num)
        sxx = np.asarray(stats.phi_ss).ravel()
        slope = np.abs(np.asarray(stats.cross_ss).ravel()) / (Q * sxx)
        se = NOISE_SD / (Q * np.sqrt(sxx))
        z = np.sqrt(1.0 / (2.0 * share))
        print(f"{share:>6g} {z:>5.2f} | {np.median(slope / se):>11.2f} {np.median(np.sqrt(sxx / W) / post_sd):>16.2f} | "
              f"{np.mean(slope / A):>8.2f} {1 + 2 / z**2:>7.2f}", flush=True)


def kendall(num: int, known_width: float) -> None:
    """Coverage (all / silent / warned) and width with the h prior centred on the slope less its window bias."""
    print(f"{'tau/W':>6} {'silent':>6} | h prior at m - (1 + 3 r) / (eta q n): 90% coverage all / silent / warned, width")
    for share in SHARES:
        stats, lr = traces(share, num)
        noise = jnp.full((num, 1), NOISE_SD, jnp.float32)
        base = M.trace_priors(stats, noise, Q)
        silent = ~np.asarray(I.identifiability(stats, np.full((num, 1), NOISE_SD), Q, lr).coordinate_fails).ravel()
        r = jnp.clip(1.0 - lr * Q * base.h_loc, -1.0, 1.0)
        post = G.grid_posterior(stats, base._replace(h_loc=base.h_loc - (1.0 + 3.0 * r) / (lr * Q * stats.count)), noise, Q)
        lo, hi = np.asarray(G.grid_phi_star_quantiles(post, [0.05, 0.95])).reshape(2, num)
        inside = (lo <= 0.0) & (hi >= 0.0)
        parts = [f"{inside[s].mean():.2f}" if s.any() else "-" for s in (np.ones_like(silent), silent, ~silent)]
        print(f"{share:>6g} {silent.mean():>6.2f} | {' / '.join(parts)}, {np.median(hi - lo) / known_width:.1f}", flush=True)


if __name__ == "__main__":
    main()
