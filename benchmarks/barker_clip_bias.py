"""DP Barker clip bias (docs/reliability.md, "DP Barker's clip"): a 2-coefficient logistic regression, chains
against a grid posterior, at clip B = factor sqrt(b) / N and random-walk step. Patching CLIP_FACTOR is
for the diagnosis only (the privacy claim holds for 0.99). Usage: mode (private|exact) chains steps burn
step:factor ...
"""
import math, sys, time
import jax, jax.numpy as jnp, numpy as np
from dpposterior import mcmc
from dpposterior.mcmc import barker
from dpposterior.mcmc.kernels import init_states

def run(kernel, init, steps, seed, thin=10):
    state = init_states(kernel.model, init)
    keys = jax.random.split(jax.random.key(seed), init.shape[0])
    @jax.jit
    def go(keys, state):
        def chain(key, s):
            def body(c, k):
                c, info = kernel.step(k, c)
                return c, (c.position, info.accepted)
            _, (pos, acc) = jax.lax.scan(body, s, jax.random.split(key, steps))
            return pos[::thin], acc.mean()
        return jax.vmap(chain)(keys, state)
    pos, acc = go(keys, state)
    return np.asarray(pos), float(np.mean(acc))

def summarize(pos, burn):
    d = pos[:, burn:, :]  # chains, draws, dim
    chain_means = d.mean(1)
    m = d.reshape(-1, d.shape[2]).mean(0); s = d.reshape(-1, d.shape[2]).std(0)
    se = chain_means.std(0, ddof=1) / math.sqrt(d.shape[0])  # chains independent
    chain_sds = d.std(1); se_sd = chain_sds.std(0, ddof=1) / math.sqrt(d.shape[0])
    return m, s, se, se_sd

# ---------- logistic regression
def logreg(n=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (n, 2))
    w = np.array([1.0, -0.5])
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-x @ w)), 1.0, -1.0)
    data = np.c_[x, y].astype(np.float32)
    energy = lambda th, r: jax.nn.softplus(-r[2] * (r[0] * th[0] + r[1] * th[1]))
    lp = lambda th: -0.5 * jnp.sum(th ** 2) / 25.0
    c = np.linalg.norm(x, axis=1)
    model = mcmc.energy_model(energy, data, log_prior_fn=lp, bound_constants=c, box=(np.full(2, -10.0), np.full(2, 10.0)))
    # grid posterior
    g = np.linspace(-1.0, 3.0, 801); h = np.linspace(-2.5, 1.5, 801)
    G, H = np.meshgrid(g, h, indexing="ij")
    logp = np.zeros_like(G)
    for i in range(n):
        logp -= np.logaddexp(0, -y[i] * (x[i, 0] * G + x[i, 1] * H))
    logp -= 0.5 * (G ** 2 + H ** 2) / 25
    p = np.exp(logp - logp.max()); p /= p.sum()
    mean = np.array([(p * G).sum(), (p * H).sum()])
    sd = np.sqrt(np.array([(p * G ** 2).sum(), (p * H ** 2).sum()]) - mean ** 2)
    # exact draws for init
    flat = rng.choice(p.size, 4000, p=p.ravel())
    draws = np.c_[G.ravel()[flat], H.ravel()[flat]]
    return model, data, mean, sd, draws

def clip_share(data, draws, step, clip, rng):
    th = draws; thp = th + step * rng.standard_normal(th.shape)
    x, y = data[:, :2].astype(np.float64), data[:, 2].astype(np.float64)
    u = lambda t: np.logaddexp(0, -y[None, :] * (t @ x.T))
    d = u(th) - u(thp)
    return float(np.mean(np.abs(d) > clip)), float(np.mean(np.any(np.abs(d) > clip, axis=1)))
model, data, mean, sd, draws = logreg()
n = data.shape[0]
print("grid posterior mean", mean, "sd", sd, flush=True)
rng = np.random.default_rng(1)
B0 = 0.99 * math.sqrt(n) / n
mode = sys.argv[1]
chains, steps, burn = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for arg in sys.argv[5:]:
    step_s, factor = map(float, arg.split(":"))
    barker.CLIP_FACTOR = factor   # scale B (diagnostic only; breaks the privacy claim)
    kernel = mcmc.dp_barker_kernel(model, mcmc.random_walk(step_s), private=(mode == "private"))
    clip = kernel.config.clip
    t0 = time.time()
    for seed in (1, 2):
        init = draws[rng.choice(len(draws), chains)].astype(np.float32)
        pos, acc = run(kernel, init, steps, seed)
        m, s, se, se_sd = summarize(pos, burn // 10)
        cs = clip_share(data, draws[:500], step_s, clip, rng) if clip else (0, 0)
        print(f"{mode} step {step_s} B {clip if clip else 0:.4f} (factor {factor}) seed {seed}: acc {acc:.3f} "
              f"mean {m.round(3)} +- {se.round(3)} sd {s.round(3)} +- {se_sd.round(3)} "
              f"clipped terms {cs[0]:.3f} steps-with-clip {cs[1]:.3f} [{time.time()-t0:.0f}s]", flush=True)
