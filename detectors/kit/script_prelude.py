"""The helper functions a standalone reproduction opens with (``detectors.kit.script``): how
it reads an answer, compares it and finishes, and exact attention in the target's own language
where the comparison needs an expected value."""


def helpers(target, requests, claim, judged):
    """The functions the script defines: reading results, comparing, and exact attention for
    the calls judged against it."""
    torch = target.backend == "torch"
    lines = []
    inputs = any(r.layout != "contiguous" for r in requests)
    upstream = claim.kind in ("gradient", "answer") and \
        requests[claim.call].grad_layout is not None
    if inputs or (torch and upstream):
        lines += LAID_OUT[torch]
    lines += (_AS_ARRAY_TORCH if torch else _AS_ARRAY_NUMPY) + _DIFFERS + _FINISH
    if torch and claim.kind == "unchanged" and any(r.guarded for r in requests):
        lines += _WRITTEN
    exact = [requests[n] for n in judged]
    if claim.kind == "gradient":
        exact.append(requests[claim.call])
    if exact:
        lines += _exact_helpers(target, exact)
    return lines


_WRITTEN = [
    "def written(what, t, version):",
    '    """Print whether the call wrote into ``t``: its version counter moved from ``version``',
    '    (an in-place write moves it even when a second one puts the values back)."""',
    "    moved = t._version != version",
    '    print(f"{what}: version counter {version} before the call, {t._version} after"',
    '          + (" (written into)" if moved else ""))',
    "    return moved",
    "",
    "",
]
_AS_ARRAY_NUMPY = [
    "def as_array(x):",
    '    """A result, or an expected value, as a float64 NumPy array of its own."""',
    "    return np.array(x, dtype=np.float64)  # a copy",
    "",
    "",
]
_AS_ARRAY_TORCH = [
    "def as_array(x):",
    '    """A result, or an expected value, as a float64 NumPy array of its own (a tensor',
    '    detached and moved to the CPU first)."""',
    "    if isinstance(x, torch.Tensor):",
    '        return x.detach().to("cpu", torch.float64).numpy().copy()',
    "    return np.array(x, dtype=np.float64)  # a copy",
    "",
    "",
]
_LAID_OUT_NUMPY = [
    "def laid_out(a, layout):",
    '    """The contiguous array ``a``, same values, laid out in memory as ``layout`` says."""',
    '    if layout == "transposed" and a.ndim >= 2:  # as splitting heads leaves it',
    "        axes = (-3, -2) if a.ndim >= 3 else (-2, -1)",
    "        return np.ascontiguousarray(a.swapaxes(*axes)).swapaxes(*axes)",
    '    if layout == "expanded":  # one copy along every axis it is constant on, stride 0',
    "        small = a",
    "        for axis in range(a.ndim):",
    "            first = small.take([0], axis=axis)",
    "            if small.shape[axis] > 1 and (small == first).all():",
    "                small = first",
    "        return np.broadcast_to(np.ascontiguousarray(small), a.shape)",
    '    if layout == "offset" and a.ndim >= 1:  # [..., 1:] of a buffer one column wider',
    "        wide = np.zeros(a.shape[:-1] + (a.shape[-1] + 1,), dtype=a.dtype)",
    "        wide[..., 1:] = a",
    "        return wide[..., 1:]",
    "    return a",
    "",
    "",
]
_LAID_OUT = [
    "def laid_out(t, layout):",
    '    """The contiguous tensor ``t``, same values, laid out in memory as ``layout`` says."""',
    '    if layout == "transposed":  # made as (..., L, H, Ev) and transposed back',
    "        axes = (-3, -2) if t.dim() >= 3 else (-2, -1)",
    "        return t.transpose(*axes).contiguous().transpose(*axes)",
    '    if layout == "expanded":  # one copy along every axis it is constant on, stride 0',
    "        small = t",
    "        for axis in range(t.dim()):",
    "            if small.shape[axis] > 1 and bool((small == small.narrow(axis, 0, 1)).all()):",
    "                small = small.narrow(axis, 0, 1)",
    "        return small.contiguous().expand(t.shape)",
    '    if layout == "offset":  # [..., 1:] of a buffer one column wider',
    "        wide = t.new_zeros(t.shape[:-1] + (t.shape[-1] + 1,))",
    "        wide[..., 1:] = t",
    "        return wide[..., 1:]",
    "    return t",
    "",
    "",
]
LAID_OUT = {True: _LAID_OUT, False: _LAID_OUT_NUMPY}  # by whether the target takes torch
_DIFFERS = [
    "def differs(what, expected, got, atol):",
    '    """Print where ``got`` is furthest from ``expected``; True when that is more than',
    '    ``atol`` (a NaN or inf where a finite number is due always is)."""',
    "    if got is None:",
    '        print(f"{what}: expected an array of shape {as_array(expected).shape}, got None")',
    "        return True",
    "    expected, got = as_array(expected), as_array(got)",
    "    if got.shape != expected.shape:",
    '        print(f"{what}: expected shape {expected.shape}, got shape {got.shape}")',
    "        return True",
    '    with np.errstate(invalid="ignore"):',
    "        diff = np.abs(got - expected)",
    "    equal = (got == expected) | (np.isnan(got) & np.isnan(expected))",
    "    diff = np.where(equal, 0.0, np.where(np.isnan(diff), np.inf, diff))",
    "    if not diff.size:",
    "        return False",
    "    at = np.unravel_index(np.argmax(diff), diff.shape)",
    "    far = int(np.sum(diff > atol))",
    '    print(f"{what} at {list(map(int, at))}: expected {float(expected[at])!r}, "',
    '          f"got {float(got[at])!r}, difference {float(diff[at]):.3g} "',
    '          f"(allowed {atol:.3g}; {far} of {diff.size} entries differ by more)")',
    "    return far > 0",
    "",
    "",
]
ALLOWANCE = [
    "def allowance(expected, units):",
    '    """The error allowed where the failed check stated none: ``units`` (float64\'s',
    '    1e-10, or 64 units in the last place of a lower precision) times max(1, |expected|)."""',
    "    return units * max(1.0, float(np.abs(as_array(expected)).max(initial=0.0)))",
    "",
    "",
]
_FINISH = [
    "def finish(failed):",
    '    """Exit 1 while the failure reproduces, 0 once it does not."""',
    '    print("reproduced: the implementation still fails" if failed',
    '          else "not reproduced: the implementation now passes this check")',
    "    sys.exit(1 if failed else 0)",
    "",
    "",
]


def _exact_helpers(target, requests):
    """Exact attention for the functions ``requests`` call, in the target's language (torch,
    whose autograd gives the exact gradient, for a torch target), with its declared mask
    convention and causal alignment."""
    torch = target.backend == "torch"
    fns = {r.fn for r in requests}
    drop = target.mask_convention == "drop"
    if target.contract == "sdpa":
        return _sdpa(drop, target.causal_alignment) + _softmax(torch)
    if "causal_self_attention" in fns:
        fns |= {"attention", "causal_mask"}
    lines = _softmax(torch)
    if "attention" in fns:
        lines += _lesson_attention(torch, drop)
    if "causal_mask" in fns:
        tril = "torch.ones(T, T, dtype=torch.bool).tril()" if torch else \
            "np.tril(np.ones((T, T), dtype=bool))"
        lines += ["def causal_mask(T):",
                  '    """(T, T) bool: ' + ("True where query i may NOT attend key j (the drop "
                                             'convention), j > i."""' if drop else
                                             'True where query i may attend key j, j <= i."""'),
                  f"    return {'~' if drop else ''}{tril}", "", ""]
    if "causal_self_attention" in fns:
        lines += ["def causal_self_attention(X, W_q, W_k, W_v):",
                  '    """Attention of the projections X·W under the causal mask: (out, '
                  'weights)."""',
                  "    return attention(X @ W_q, X @ W_k, X @ W_v, causal_mask(X.shape[-2]))",
                  "", ""]
    return lines


def _softmax(torch):
    if torch:
        body = ["    x = torch.as_tensor(x, dtype=torch.float64)",
                "    top = x.amax(dim=-1, keepdim=True)",
                "    e = torch.exp(x - torch.where(torch.isfinite(top), top, 0.0))",
                "    total = e.sum(dim=-1, keepdim=True)",
                "    return e / torch.where(total == 0.0, 1.0, total)"]
    else:
        body = ["    x = np.asarray(x, dtype=np.float64)",
                "    top = np.max(x, axis=-1, keepdims=True)",
                "    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))",
                "    total = np.sum(e, axis=-1, keepdims=True)",
                "    return e / np.where(total == 0.0, 1.0, total)"]
    return ["def softmax(x):",
            '    """Softmax over the last axis in float64; a row of -inf (a query with no '
            'allowed',
            '    key) gives zeros."""', *body, "", ""]


def _lesson_attention(torch, drop):
    forbid = "mask" if drop else "~mask"
    said = "True" if drop else "False"
    if torch:
        body = ["    Q, K, V = (torch.as_tensor(a, dtype=torch.float64) for a in (Q, K, V))",
                "    scores = Q @ K.transpose(-2, -1) / Q.shape[-1] ** 0.5",
                "    if mask is not None:",
                f"        scores = torch.where({forbid}, -torch.inf, scores)"]
    else:
        body = ["    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))",
                "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])",
                "    if mask is not None:",
                f"        scores = np.where({forbid}, -np.inf, scores)"]
    if torch:
        body[2:2] = ["    mask = None if mask is None else torch.as_tensor(mask)"]
    return ["def attention(Q, K, V, mask=None):",
            '    """Exact attention as the lesson defines it, in float64: softmax(Q·Kᵀ/√d_k)·V, '
            "where",
            f'    a key the mask forbids ({said}) weighs 0. Returns (out, weights)."""',
            *body,
            "    weights = softmax(scores)",
            "    return weights @ V, weights", "", ""]


def _sdpa(drop, alignment):
    where = "keys 0..i" if alignment == "top-left" else "keys 0..i + S - L (bottom-right)"
    diagonal = "" if alignment == "top-left" else "S - L"
    return [
        "def attention(query, key, value, attn_mask=None, is_causal=False, scale=None, "
        "enable_gqa=False):",
        '    """Exact attention as F.scaled_dot_product_attention defines it, in float64:',
        "    softmax(query·keyᵀ·scale + attn_mask)·value, scale 1/√E unless given; a key that "
        "is_causal,",
        f"    a {'True' if drop else 'False'} entry of a bool mask or a -inf entry of a float "
        "one forbids weighs 0,",
        '    and a query with no allowed key gets an output row of zeros."""',
        "    q, k, v = (torch.as_tensor(a, dtype=torch.float64) for a in (query, key, value))",
        "    if enable_gqa:  # query head h reads key/value head h // (H_q / H_kv)",
        "        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)",
        "        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], dim=-3)",
        "    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)",
        "    L, S = scores.shape[-2:]",
        f"    if is_causal:  # query i sees {where}",
        f"        allowed = torch.ones(L, S, dtype=torch.bool).tril({diagonal})",
        "        scores = torch.where(allowed, scores, -torch.inf)",
        "    if attn_mask is not None:",
        "        mask = torch.as_tensor(attn_mask)",
        "        if mask.dtype == torch.bool:",
        f"            scores = torch.where({'mask' if drop else '~mask'}, -torch.inf, scores)",
        "        else:",
        "            scores = scores + mask.to(torch.float64)",
        "    return softmax(scores) @ v",
        "",
        "",
    ]


# -- the calls -------------------------------------------------------------------------------
