"""The training device decided without torch agrees with torch."""

from __future__ import annotations

import pytest
import torch

from fedgame.errors import ScenarioError
from fedgame.learning import device


def test_device_name_agrees_with_torch() -> None:
    usable = torch.cuda.is_available()
    assert device.cuda_available() == usable
    assert device.device_name("auto") == ("cuda" if usable else "cpu")
    assert device.device_name("cpu") == "cpu"
    if device.no_gpu_driver():
        assert not usable  # no driver node: torch cannot see a GPU either


def test_no_driver_node_means_no_gpu_and_no_torch_question(monkeypatch) -> None:
    monkeypatch.setattr(device.sys, "platform", "linux")
    monkeypatch.setattr(device.glob, "glob", lambda pattern: [])
    assert device.no_gpu_driver() and not device.cuda_available()
    assert device.device_name("auto") == "cpu"
    with pytest.raises(ScenarioError) as err:
        device.device_name("cuda")
    assert err.value.key == "training.device" and "use auto or cpu" in err.value.allowed


def test_a_driver_node_lets_torch_decide(monkeypatch) -> None:
    monkeypatch.setattr(device.sys, "platform", "linux")
    monkeypatch.setattr(device.glob, "glob", lambda pattern: ["/dev/nvidiactl"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not device.no_gpu_driver()
    assert device.device_name("auto") == "cuda" and device.device_name("cuda") == "cuda"
