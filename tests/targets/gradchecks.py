"""SDPA-style callables whose backward breaks one of gradcheck's checks each (and one that is
right), to compare attnzoo's parent-side gradcheck with torch.autograd.gradcheck itself."""
import torch
import torch.nn.functional as F


def right(query, key, value, attn_mask=None, is_causal=False):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                          is_causal=is_causal)


class _Custom(torch.autograd.Function):
    """Forward is SDPA; ``backward`` is the class's ``grads(ctx, g)``."""

    @staticmethod
    def forward(ctx, q, k, v):
        with torch.enable_grad():
            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
            out = F.scaled_dot_product_attention(qq, kk, vv)
        ctx.graph = (out, qq, kk, vv)
        return out.detach()

    @staticmethod
    def backward(ctx, g):
        out, qq, kk, vv = ctx.graph
        return torch.autograd.grad(out, (qq, kk, vv), g, retain_graph=True)


class _HalfGrad(_Custom):
    @staticmethod
    def backward(ctx, g):
        return tuple(x / 2 for x in _Custom.backward(ctx, g))


class _Noisy(_Custom):
    @staticmethod
    def backward(ctx, g):
        return tuple(x + 1e-12 * torch.rand_like(x) for x in _Custom.backward(ctx, g))


class _IgnoresUpstream(_Custom):
    @staticmethod
    def backward(ctx, g):  # right for every nonzero upstream, ones for a zero one
        if not g.any():
            return tuple(torch.ones_like(t) for t in ctx.graph[1:])
        return _Custom.backward(ctx, g)


class _WrongSize(_Custom):
    @staticmethod
    def backward(ctx, g):
        dq, dk, dv = _Custom.backward(ctx, g)
        return dq.transpose(-2, -1), dk, dv  # (…, E, L): as many numbers, the wrong shape


def half_grad(query, key, value):
    return _HalfGrad.apply(query, key, value)


def noisy(query, key, value):
    return _Noisy.apply(query, key, value)


def ignores_upstream(query, key, value):
    return _IgnoresUpstream.apply(query, key, value)


def wrong_size(query, key, value):
    return _WrongSize.apply(query, key, value)


def detached(query, key, value):
    return F.scaled_dot_product_attention(query, key, value).detach()


def raises_in_backward(query, key, value):
    return _Raises.apply(query, key, value)


class _Raises(_Custom):
    @staticmethod
    def backward(ctx, g):
        raise ValueError("no backward here")
