"""A window (and a causal mask) is a slice of the keys: masked attention equals unmasked
attention over exactly the keys each query may see (V3, V4, V5).

Metamorphic: every query is sent alone, as a sequence of one, with the contiguous range of
keys its window and causal mask leave visible, no window and no causal flag. A window one key
too wide, a bound that treats 0 as unbounded, or a cap applied after the mask (a hidden key's
−∞ becomes −cap and takes weight) makes the two differ. Cases with ALiBi are left to
alibi_is_a_float_bias, since slicing the keys moves the diagonal the bias is measured from.
"""

from detectors.kit import varlen

PROPERTY = ("Windowed or causal attention equals unmasked attention over exactly the keys each "
            "query may see.")
CLAUSES = ("V3", "V4", "V5")
ORACLE = "metamorphic"


def check(subject):
    for case in subject.cases():
        masked = case.args["window_size"] != (-1, -1) or case.args["causal"]
        if not masked or case.args.get("alibi_slopes") is not None:
            continue
        out, _ = subject.run(case)
        sliced = varlen.key_slices(case, subject.alignment)
        want, _ = subject.run(sliced)
        subject.same(out[varlen.owned(case)], want, case,
                     relation="should equal each query alone over its visible keys")
