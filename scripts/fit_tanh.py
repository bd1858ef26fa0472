#!/usr/bin/env python3
# Fits tanh(x)/x ~ P(t)/Q(t), t = x^2, Q(0) = 1, toward the least maximum relative error on
# [0, c]: linearized weighted least squares (Loeb's iteration) with Lawson's reweighting.
# Usage: scripts/fit_tanh.py C DEG_P DEG_Q   (kiln's CPU tanh: 0.625 2 1; needs python3-mpmath)
import sys

import mpmath as mp

mp.mp.dps = 40
c = mp.mpf(sys.argv[1])
deg_p, deg_q = int(sys.argv[2]), int(sys.argv[3])
N = 600
# A uniform grid and a Chebyshev-like one (dense near both ends).
xs = [c * mp.mpf(i) / N for i in range(1, N + 1)]
xs += [c * (1 - mp.cos(mp.pi * i / (2 * N))) for i in range(1, N + 1)]
xs = sorted(set(xs))
ts = [x * x for x in xs]
fs = [mp.tanh(x) / x for x in xs]


def horner(coeffs, t):
    r = mp.mpf(0)
    for k in reversed(coeffs):
        r = r * t + k
    return r


def solve(lawson, q_prev):
    # Minimizes sum w (P(t) - f Q(t))^2 with w = lawson / (f Q_prev(t))^2 (relative error).
    n = deg_p + 1 + deg_q
    A = mp.matrix(n, n)
    b = mp.matrix(n, 1)
    for t, f, l, q in zip(ts, fs, lawson, q_prev):
        w = l / (f * q) ** 2
        row = [t**k for k in range(deg_p + 1)] + [-f * t**k for k in range(1, deg_q + 1)]
        for i in range(n):
            b[i] += w * row[i] * f
            for j in range(n):
                A[i, j] += w * row[i] * row[j]
    s = mp.lu_solve(A, b)
    return [s[i] for i in range(deg_p + 1)], [mp.mpf(1)] + [s[deg_p + 1 + k] for k in range(deg_q)]


lawson = [mp.mpf(1)] * len(xs)
q_prev = [mp.mpf(1)] * len(xs)
best = None
for _ in range(40):
    P, Q = solve(lawson, q_prev)
    errs = [(horner(P, t) / horner(Q, t) - f) / f for t, f in zip(ts, fs)]
    worst = max(abs(e) for e in errs)
    if best is None or worst < best[0]:
        best = (worst, P, Q)
    q_prev = [horner(Q, t) for t in ts]
    total = sum(l * abs(e) for l, e in zip(lawson, errs))
    lawson = [l * abs(e) / total * len(xs) + mp.mpf("1e-30") for l, e in zip(lawson, errs)]
worst, P, Q = best
print("max relative error", mp.nstr(worst, 5))
print("P", [mp.nstr(v, 12) for v in P])
print("Q", [mp.nstr(v, 12) for v in Q])
