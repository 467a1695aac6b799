"""Which device a run trains on, decided without importing torch where the answer is certain.

``training.device`` is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``. ``auto`` means CUDA when
torch can use a GPU, else the CPU; ``cuda`` without a usable GPU, or ``cuda:N`` past the
visible GPUs, is a scenario error. Asking torch
(``torch.cuda.is_available()``) costs its import, seconds that ``fedgame validate`` should not
pay on a machine without a GPU. A GPU torch can use needs a driver device node: on Linux, when
none of :data:`GPU_DEVICE_NODES` exists (NVIDIA, NVIDIA Tegra, WSL's GPU bridge, AMD ROCm), no
GPU is usable and torch is not imported; elsewhere, and whenever one exists, torch decides.
"""

from __future__ import annotations

import glob
import sys

from fedgame.errors import ScenarioError

#: paths of which at least one exists when a GPU driver torch could use is loaded (Linux)
GPU_DEVICE_NODES = (
    "/dev/nvidia*",
    "/dev/nvhost-*",
    "/dev/dxg",
    "/dev/kfd",
    "/proc/driver/nvidia",
)


def no_gpu_driver() -> bool:
    """True when this machine certainly has no GPU torch could use (Linux, no driver node)."""
    return sys.platform.startswith("linux") and not any(
        glob.glob(pattern) for pattern in GPU_DEVICE_NODES
    )


def cuda_available() -> bool:
    """``torch.cuda.is_available()``, without importing torch when there is no GPU driver."""
    if no_gpu_driver():
        return False
    import torch

    return bool(torch.cuda.is_available())


def device_name(name: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available, else ``"cpu"``; ``"cuda"`` without a GPU is a
    ``ScenarioError`` on ``training.device``; any other name is returned as it is."""
    if name.startswith("cuda"):
        if not cuda_available():
            raise ScenarioError(
                "training.device", name, "CUDA is not available here; use auto or cpu"
            )
        index = name.partition(":")[2]
        if index:
            import torch

            count = torch.cuda.device_count()
            if int(index) >= count:
                raise ScenarioError(
                    "training.device", name, f"a visible GPU: cuda:0 .. cuda:{count - 1}, or cuda"
                )
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    return name
