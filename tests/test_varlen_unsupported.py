"""What a varlen target declares it does not support (detectors/kit/varlen_capabilities.py).

A declared word never reaches the kernel: each case that uses it is run without it where it can
be taken out and set aside where it cannot; a detector left with no call is ``unsupported``,
never passed; what the target does support is still judged, so a bug elsewhere is still caught;
and a target that declares all it is asked for is not conformant, since nothing was judged.
"""

import pytest
import torch
from test_cli import attnzoo as in_process
from test_varlen_check import quick, verdicts

import detectors
import zoo.varlen as varlen_zoo
from detectors.kit import varlen, varlen_capabilities
from reference.varlen import attn_varlen

DETECTORS = {d.NAME: d for d in detectors.varlen_detectors()}
WORDS = tuple(varlen_capabilities.VOCABULARY)
OF_A_CALL = tuple(varlen_capabilities.USES)
KERNEL = "tests/targets/varlen/no_pages_no_alibi.py:attn_varlen"


def test_every_word_is_read_from_a_call_or_named_as_not_one():
    assert set(OF_A_CALL) | set(varlen_capabilities.NOT_OF_A_CALL) == set(WORDS)
    assert not set(OF_A_CALL) & set(varlen_capabilities.NOT_OF_A_CALL)


def test_parse_keeps_the_vocabulary_order_and_names_an_unknown_word():
    assert varlen_capabilities.parse("lse, paged,alibi") == ("paged", "alibi", "lse")
    with pytest.raises(ValueError, match="'pages'.*use one of paged"):
        varlen_capabilities.parse("pages")


@pytest.mark.parametrize("word", OF_A_CALL)
def test_some_case_of_the_battery_uses_each_word(word):
    """Otherwise declaring it would set nothing aside, and its test below would be empty."""
    assert any(varlen_capabilities.USES[word](c.values) for c in varlen.battery(0, "standard")
               + [c.to(torch.float64) for c in varlen.battery(0, "quick")])


@pytest.mark.parametrize("word", [w for w in OF_A_CALL if w != "float64"])
def test_a_case_without_a_word_no_longer_uses_it_and_the_reference_answers_it(word):
    subject = varlen.Subject(varlen.Target(attn_varlen, unsupported=(word,)))
    plain = [c for c in subject.cases() if c.name in subject.without]
    assert plain or subject.set_aside  # the word is taken out of some case or sets it aside
    for case in plain:
        assert word not in varlen_capabilities.blocking((word,), varlen.call_values(case, False))
        out, _ = subject.run(case)
        subject.same(out, subject.expected(case)[0], case, rows=varlen.owned(case))


def test_a_declared_word_never_reaches_the_kernel():
    sent = []

    def kernel(q, k, v, *args, **kw):
        sent.append(kw)
        return attn_varlen(q, k, v, *args, **kw)

    target = varlen.Target(kernel, unsupported=("paged", "alibi", "softcap", "lse"))
    for d in DETECTORS.values():
        varlen.verdict(d, target)
    assert sent, "the kernel was never called"
    assert all(kw.get("block_table") is None and kw.get("alibi_slopes") is None
               and not kw.get("softcap") and not kw.get("return_lse") for kw in sent)


def test_a_detector_with_nothing_left_is_not_passed():
    target = varlen.Target(attn_varlen, unsupported=("softcap",))
    outcome, why = varlen.verdict(DETECTORS["softcap_limit_and_order"], target)
    assert outcome == "n/a" and "made no call" in why
    outcome, why = varlen.verdict(DETECTORS["lse_matches_output"],
                                  varlen.Target(attn_varlen, unsupported=("lse",)))
    assert outcome == "n/a" and "return_lse" in why


def test_a_bug_elsewhere_is_still_caught():
    """The window one key too wide, declaring ALiBi, the cache and the LSE unsupported: the
    window's detectors still see it."""
    bug = next(b for b in varlen_zoo.BUGS if b.id == "varlen-window-one-key-too-wide")
    target = varlen.Target(varlen_zoo.implementation(bug),
                           unsupported=("paged", "alibi", "lse"))
    for name in ("window_is_a_key_slice", "matches_reference", "window_counting_convention"):
        assert varlen.verdict(DETECTORS[name], target, ("float64",))[0] == "fail", name


def test_check_judges_what_the_kernel_supports_and_sets_the_rest_aside():
    done, doc = quick(KERNEL, "--unsupported", "paged,alibi,lse", "--dtype", "float32")
    assert done.returncode == 0, done.stdout + done.stderr
    found = verdicts(doc)
    assert found["matches_reference"] == "survived"
    assert found["lse_matches_output"] == "unsupported"
    assert found["alibi_is_a_float_bias"] == "unsupported"
    assert doc["implementations"][0]["target"]["unsupported"] == ["paged", "alibi", "lse"]
    per = {f["detector"]: f for f in doc["implementations"][0]["findings"]}
    assert any("run without" in n for n in per["matches_reference"]["notes"])


def test_the_same_kernel_undeclared_is_flagged():
    done, doc = quick(KERNEL, "--dtype", "float32", "--only", "matches_reference")
    assert done.returncode == 1 and verdicts(doc)["matches_reference"] == "crashed"


def test_declaring_everything_is_not_conformant():
    """Nothing judged is no verdict: every detector unsupported; the exit code says only that
    nothing was flagged (0), as for the SDPA contract."""
    args = (KERNEL, "--unsupported", "float64", "--dtype", "float64", "--depth", "quick")
    done, doc = quick(*args)
    assert doc["summary"]["passed"] == 0 and not doc["summary"]["conformant"]
    assert set(verdicts(doc).values()) == {"unsupported"}
    said = in_process("check", *args, "--contract", "varlen")
    assert "no verdict: nothing was judged" in said.stdout and "conformant" not in said.stdout


def test_an_unknown_word_is_bad_input():
    done, _ = quick(KERNEL, "--unsupported", "pages")
    assert done.returncode == 2 and "unknown varlen capability 'pages'" in done.stderr


def test_a_cap_that_kept_the_scores_judgeable_is_not_taken_out():
    """Logits in the thousands are judged through their cap; run without it, float32 rounding
    alone would exceed the tolerance, a false alarm: that case is set aside instead."""
    subject = varlen.Subject(varlen.Target(attn_varlen, unsupported=("softcap",)),
                             torch.float32)
    names = {c.name for c in subject.cases()}
    assert "softcap on logits past exp's range" in subject.set_aside
    assert "small softcap (without softcap)" in names
    assert all(varlen.max_score(c) <= varlen.UNCAPPED_SCORES for c in subject.cases()
               if c.name in subject.without)  # what lost its cap; no case of it is past that


# -- declared beside the kernel -----------------------------------------------------------------

DECLARES = "tests/targets/varlen/declares_its_conventions.py"


def test_what_a_module_declares_is_what_the_options_declare():
    """ATTNZOO_WINDOW_COUNTING and ATTNZOO_UNSUPPORTED beside the kernel: judged as with
    --window-counting counts-current-token --unsupported lse, and the report says so."""
    only = ("--only", "window_counting_convention", "--only", "window_is_a_key_slice",
            "--only", "lse_matches_output", "--dtype", "float64")
    done, doc = quick(f"{DECLARES}:attn_varlen", *only)
    assert done.returncode == 0, done.stdout + done.stderr
    found = verdicts(doc)
    assert found["window_counting_convention"] == "survived"
    assert found["window_is_a_key_slice"] == "survived"
    assert found["lse_matches_output"] == "unsupported"
    target = doc["implementations"][0]["target"]
    assert target["window_counting"] == "counts the current token"
    assert target["unsupported"] == ["lse"]
    # as for ATTNZOO_EMPTY_ROWS under SDPA, only a convention other than the contract's on
    # the command line overrides the module's: naming the contract's own leaves the module's
    done, doc = quick(f"{DECLARES}:attn_varlen", *only, "--window-counting", "inclusive")
    assert verdicts(doc)["window_counting_convention"] == "survived"
    # and --unsupported adds to the module's words
    done, doc = quick(f"{DECLARES}:attn_varlen", *only, "--unsupported", "paged")
    assert doc["implementations"][0]["target"]["unsupported"] == ["paged", "lse"]


@pytest.mark.parametrize("name,said", [
    ("lying_counting", "ATTNZOO_WINDOW_COUNTING must be one of 'inclusive', "
                       "'counts-current-token' (a string)"),
    ("lying_words", "ATTNZOO_UNSUPPORTED: unknown varlen capability 'pages'"),
    ("raising_declaration", "ATTNZOO_UNSUPPORTED must be a tuple of strings"),
])
def test_a_declaration_outside_the_vocabulary_is_bad_input(name, said):
    done, _ = quick(f"{DECLARES}:{name}")
    assert done.returncode == 2 and said in done.stderr


def test_a_kernel_declaring_strided_gets_dense_copies_of_every_call():
    """Derived calls too (a sequence sliced out is a view at an offset): nothing is set aside,
    the values are the same, so every detector still judges it."""
    seen = []

    def kernel(q, k, v, *args, **kw):
        seen.append(all(t.is_contiguous() and not t.storage_offset() for t in (q, k, v)))
        return attn_varlen(q, k, v, *args, **kw)

    target = varlen.Target(kernel, unsupported=("strided",))
    for d in DETECTORS.values():
        assert varlen.verdict(d, target, ("float64",))[0] == "pass", d.NAME
    assert seen and all(seen)
    assert any(not t.is_contiguous() or t.storage_offset()  # there were views to copy
               for c in varlen.battery(0, "standard") for t in (c.q, c.k, c.v))


def test_a_contiguous_only_kernel_is_flagged_undeclared_and_clean_declared():
    kernel = "tests/targets/varlen/contiguous_only.py:attn_varlen"
    only = ("--only", "matches_reference", "--only", "per_sequence_equivalence", "--dtype",
            "float32")
    done, doc = quick(kernel, *only)
    assert done.returncode == 1 and verdicts(doc)["matches_reference"] == "crashed"
    done, doc = quick(kernel, *only, "--unsupported", "strided")
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(verdicts(doc).values()) == {"survived"}
