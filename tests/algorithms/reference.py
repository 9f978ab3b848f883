"""Independent float64 references written from the formulas of docs/ppo.md as plain Python loops over lists.

Nothing here uses torch ops or the library: it is the specification in executable form.
"""

from __future__ import annotations

import math


def to_lists(t):
    return t.detach().double().tolist()


def gae(rewards, values, mask, gamma, lams):
    """GAE with carry-forward masking, one row at a time; outputs zeroed off the mask."""
    advantages, returns = [], []
    for r, v, m, lam in zip(rewards, values, mask, lams):
        next_v, a = 0.0, 0.0
        adv_row = [0.0] * len(r)
        for t in reversed(range(len(r))):
            delta = r[t] + gamma * next_v - v[t]
            a_new = delta + gamma * lam * a
            next_v = m[t] * v[t] + (1 - m[t]) * next_v
            a = m[t] * a_new + (1 - m[t]) * a
            adv_row[t] = a
        advantages.append([a_t * m_t for a_t, m_t in zip(adv_row, m)])
        returns.append([(a_t + v_t) * m_t for a_t, v_t, m_t in zip(adv_row, v, m)])
    return advantages, returns


def masked_stats(x, mask):
    items = [xi for row, mrow in zip(x, mask) for xi, mi in zip(row, mrow) if mi]
    n = len(items)
    mean = sum(items) / n
    var = sum((xi - mean) ** 2 for xi in items) / (n - 1)
    return mean, var


def whiten(x, mask):
    mean, var = masked_stats(x, mask)
    return [[(xi - mean) / math.sqrt(var + 1e-8) * mi for xi, mi in zip(row, mrow)] for row, mrow in zip(x, mask)]


def kl(logp, logp_ref, kind):
    logr = max(-20.0, min(20.0, logp_ref - logp))
    value = {"k1": -logr, "k2": logr * logr / 2,
             "k3": math.exp(logr) - 1 - logr, "k3+": math.exp(logr) - 1 - logr}[kind]
    return max(-10.0, min(10.0, value))


def pg_per_token(logp, logp_old, adv, clip_low, clip_high, dual_c):
    ratio = math.exp(logp - logp_old)
    ratio_c = min(max(ratio, 1 - clip_low), 1 + clip_high)
    loss = max(-adv * ratio, -adv * ratio_c)
    if dual_c is not None and adv < 0:
        loss = min(loss, -dual_c * adv)
    return loss


def pg_loss(logp, logp_old, adv, mask, clip_low, clip_high, dual_c, aggregation="token", weights=None):
    """Full-batch clipped PPO loss with optional per-token weights."""
    rows = len(logp)
    per_token = [
        [
            pg_per_token(logp[b][t], logp_old[b][t], adv[b][t], clip_low, clip_high, dual_c)
            * (weights[b][t] if weights else 1.0)
            for t in range(len(logp[b]))
        ]
        for b in range(rows)
    ]
    if aggregation == "token":
        n = sum(sum(row) for row in mask)
        return sum(per_token[b][t] * mask[b][t] for b in range(rows) for t in range(len(mask[b]))) / n
    seq_means = []
    for b in range(rows):
        n_b = sum(mask[b])
        if n_b:
            seq_means.append(sum(per_token[b][t] * mask[b][t] for t in range(len(mask[b]))) / n_b)
    return sum(seq_means) / len(seq_means)


def value_loss(v, v_old, ret, mask, clip, scale):
    total, n, clipped = 0.0, 0, 0
    for b in range(len(v)):
        for t in range(len(v[b])):
            if not mask[b][t]:
                continue
            err = (v[b][t] - ret[b][t]) ** 2
            if clip is not None:
                v_c = min(max(v[b][t], v_old[b][t] - clip), v_old[b][t] + clip)
                err_c = (v_c - ret[b][t]) ** 2
                clipped += err_c > err
                err = max(err, err_c)
            total += err
            n += 1
    return 0.5 * scale * total / n, clipped / n


def explained_variance(v, ret, mask):
    pairs = [(ret[b][t], v[b][t]) for b in range(len(v)) for t in range(len(v[b])) if mask[b][t]]
    n = len(pairs)
    mean_r = sum(r for r, _ in pairs) / n
    var_r = sum((r - mean_r) ** 2 for r, _ in pairs) / n
    res = [r - vv for r, vv in pairs]
    mean_res = sum(res) / n
    var_res = sum((x - mean_res) ** 2 for x in res) / n
    return 1 - var_res / var_r


def groups(rewards, ids):
    by_group = {}
    for r, g in zip(rewards, ids):
        by_group.setdefault(g, []).append(r)
    return by_group


def grpo(rewards, ids, eps=1e-6):
    out = []
    g = groups(rewards, ids)
    for r, gid in zip(rewards, ids):
        members = g[gid]
        mean = sum(members) / len(members)
        std = math.sqrt(sum((x - mean) ** 2 for x in members) / (len(members) - 1)) if len(members) > 1 else 0.0
        out.append((r - mean) / (std + eps))
    return out


def rloo(rewards, ids):
    g = groups(rewards, ids)
    return [r - (sum(g[gid]) - r) / (len(g[gid]) - 1) for r, gid in zip(rewards, ids)]


def return_to_go(rewards, mask, gamma):
    """Discounted sum of future rewards on trainable tokens, skipping masked ones."""
    out = []
    for r, m in zip(rewards, mask):
        running = 0.0
        row = [0.0] * len(r)
        for t in reversed(range(len(r))):
            if m[t]:
                running = r[t] + gamma * running
                row[t] = running
        out.append(row)
    return out
