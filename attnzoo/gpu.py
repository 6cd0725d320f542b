"""``attnzoo gpu``: PyTorch's own SDPA kernels on CUDA against the SDPA-contract detectors.

Each backend PyTorch offers (``torch.nn.attention.sdpa_kernel``: FLASH_ATTENTION,
EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH) runs alone, in float16, bfloat16 and float32, and
every detector judges it with the tolerances derived at that precision on that device. A kernel
that refuses a call ("No available kernel": flash takes no float mask, cuDNN needs certain
head sizes…) is not wrong: such calls are skipped, and a detector left with none says so.
Without a GPU the command says so and exits 0; ``--device cpu`` runs the same table on the CPU.
"""

import json
import time
from pathlib import Path

from attnzoo.runner import run as run_detector
from attnzoo.sandbox.executor import InProcess
from attnzoo.sandbox.target import Target
from attnzoo.vocabulary import CAUGHT, UNSUPPORTED, VERDICTS
from detectors import all_detectors
from detectors.kit.battery import Battery
from detectors.kit.subject import Subject
from detectors.kit.verdict import CRASHED, ERROR, ImplementationFailure

BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")
DTYPES = ("float16", "bfloat16", "float32")
MARKS = {v.name: v.mark for v in VERDICTS.values()}


class Kernel:
    """F.scaled_dot_product_attention restricted to one backend."""

    def __init__(self, backend):
        self.backend = backend

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                 scale=None, enable_gqa=False):
        import torch.nn.functional as F  # torch when a kernel is called, not on import
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([getattr(SDPBackend, self.backend)]):
            return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                  dropout_p=dropout_p, is_causal=is_causal,
                                                  scale=scale, enable_gqa=enable_gqa)


REFUSALS = ("No available kernel", "No viable backend")


def refused(text):
    """Did the kernel decline the call (as opposed to answering it wrongly)?"""
    return any(r in text for r in REFUSALS)


def kernel_subject(backend, dtype, device):
    class KernelSubject(Subject):
        """Skips the calls the kernel refuses, remembering them by case."""

        refusals = {}

        def supports(self, call):
            if not super().supports(call):
                return False
            key = (call.spec.name, self.dtype)
            if key not in self.refusals:
                try:
                    self.attend(call)
                    self.refusals[key] = False
                except ImplementationFailure as e:
                    self.refusals[key] = refused(e.what)
            return not self.refusals[key]

    target = Target(f"{backend}/{dtype}", f"attnzoo.gpu:Kernel({backend})", "sdpa",
                    "torch", device=device)
    return KernelSubject(target, InProcess(target, obj=Kernel(backend)), dtype)


def run(device, output, markdown, seed=0, depth="quick"):
    import torch  # torch when the table runs: its rendering and exit code need none

    if device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here: the GPU conformance table needs one; nothing was run "
              "(use --device cpu to run the same table on the CPU)")
        return 0
    start = time.perf_counter()
    battery = Battery(seed, depth=depth)
    detectors = all_detectors()
    table = {}
    for backend in BACKENDS:
        for dtype in DTYPES:
            subject = kernel_subject(backend, dtype, device)
            column = f"{backend}/{dtype}"
            for detector in detectors:
                finding = run_detector(detector, subject, battery)
                verdict = finding.verdict
                if verdict == CRASHED and refused(finding.message):
                    verdict = UNSUPPORTED.name
                table[(detector.NAME, column)] = {"verdict": verdict, "message": finding.message}
            print(f"{column}: done", flush=True)
    columns = [f"{b}/{d}" for b in BACKENDS for d in DTYPES]
    names = [d.NAME for d in detectors]
    device_name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    text = render(names, columns, table, device_name, torch.__version__)
    print(text)
    doc = {"device": device_name, "torch": torch.__version__, "depth": depth, "columns": columns,
           "detectors": names, "seconds": round(time.perf_counter() - start, 1),
           "cells": {f"{d}|{c}": v for (d, c), v in table.items()}}
    Path(output).write_text(json.dumps(doc, indent=1) + "\n")
    if markdown:
        Path(markdown).write_text(text + "\n")
    print(f"\n{doc['seconds']:.0f} s; written to {output}")
    return exit_code(table)


def exit_code(table):
    """As ``check``'s: 1 when a kernel is flagged (a crash included: a refusal is not one), 3
    when a detector itself failed, else 0."""
    verdicts = {cell["verdict"] for cell in table.values()}
    if verdicts & set(CAUGHT):
        return 1
    return 3 if ERROR in verdicts else 0


def render(names, columns, table, device_name, version):
    short = {b: b.split("_")[0].lower() for b in BACKENDS}
    heads = [f"{short[c.split('/')[0]]} {c.split('/')[1].replace('float', 'f').replace('bf', 'bf')}"
             for c in columns]
    lines = [f"SDPA kernels on {device_name} (torch {version}): detector × backend/dtype", "",
             "| detector | " + " | ".join(heads) + " |", "|---|" + "---|" * len(columns)]
    for name in names:
        marks = [MARKS[table[(name, c)]["verdict"]] for c in columns]
        lines.append(f"| {name} | " + " | ".join(marks) + " |")
    v = VERDICTS
    flagged = "/".join(x.mark for x in v.values() if x.caught)
    lines += ["", f"{v['survived'].mark}: the property held; {UNSUPPORTED.mark}: the kernel "
              f"refused every call the detector needed; {v['n/a'].mark}: not applicable; "
              f"{flagged}: flagged (see the JSON)."]
    return "\n".join(lines)
