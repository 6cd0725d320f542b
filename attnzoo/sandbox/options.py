"""What the sandbox can run: a device that holds data, a dtype the implementation's backend has.

Each refusal is one line naming what is wrong and what to do (the command line prints it and
exits 2). The options themselves, their time limits and their validation are
:mod:`attnzoo.options`.
"""


class BadOption(ValueError):
    """An option value or combination that cannot work: one line, what to do."""


def check_device(device):
    """A device must hold data attnzoo can read back; meta tensors have shapes but no values."""
    if device == "cpu":
        return
    import torch  # only for a device other than the CPU: --device cpu needs no torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise BadOption(f"unknown --device {device!r}: use cpu, cuda or cuda:N") from None
    if parsed.type == "meta":
        raise BadOption("--device meta holds no values for the detectors to compare: use "
                        "--device cpu or cuda")
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise BadOption(f"--device {device}: no CUDA device on this machine; use --device cpu")
    try:
        torch.zeros(1, device=parsed).cpu()
    except Exception as e:  # noqa: BLE001 - any failure means the device is unusable here
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise BadOption(f"--device {device} cannot be used here ({first}): use --device cpu"
                        ) from None


def check_targets(targets, dtype):
    """Combinations known to test nothing: bfloat16 on a NumPy implementation."""
    for target in targets:
        if target.backend == "numpy" and dtype == "bfloat16":
            raise BadOption(f"--dtype bfloat16: {target.name} is a NumPy implementation and "
                            "NumPy has no bfloat16: use --dtype float16, float32 or float64 "
                            "(or --backend torch for a torch module)")
