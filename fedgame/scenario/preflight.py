"""Every check a run makes short of training, shared by ``fedgame validate``, ``run`` and ``sweep``.

:func:`preflight` takes a validated scenario and refuses, with a ``ScenarioError`` naming the
key, the value and what is allowed, anything that would fail after the model is built:

1. the device: ``training.device: cuda`` without a GPU;
2. the data: dataset files present with readable headers (a ``SizedDataset`` plug-in's
   ``footprint``), and enough training samples for every client's ``min_size``;
3. the model: it builds for the data's sample shape (on torch's ``meta`` device);
4. memory: the estimate of :mod:`fedgame.scenario.footprint`, times the runs that execute at
   once, within the limit: the memory the operating system reports available (``MemAvailable``,
   or a cgroup's remaining allowance when lower), lowered by ``FEDGAME_MEMORY_LIMIT`` (e.g.
   ``8G``) when that is set; on CUDA also the learner against the GPU's free memory;
5. the knobs: a key set to a non-default value that no chosen plug-in reads is listed in
   ``idle`` (:mod:`fedgame.scenario.effects`; a warning, not a refusal);
6. the output location: ``<out>/<name>`` can be created and written (no file or dangling
   symbolic link in the way, write permission, and no link at all below ``<out>``: fedgame
   never writes through one), so a run never computes what it cannot save.

``validate`` runs exactly these checks; ``run`` and ``sweep`` run them before the first round.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fedgame.errors import ScenarioError
from fedgame.learning.device import device_name
from fedgame.scenario.effects import IdleKey, idle_keys
from fedgame.scenario.footprint import Footprint, estimate, human_bytes
from fedgame.scenario.schema import Scenario

MEMORY_LIMIT_ENV = "FEDGAME_MEMORY_LIMIT"
#: longest output path accepted (the run folder and file names are added to it)
MAX_OUTPUT_PATH = 3800
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


@dataclass(frozen=True)
class Preflight:
    """What the checks found: the memory estimate, the limit it was held to, the device, the
    keys set that have no effect on the run (warnings)."""

    footprint: Footprint
    limit: int
    limit_source: str
    device: str
    idle: tuple[IdleKey, ...] = ()

    def warnings(self, file: str | None = None) -> list[str]:
        """One line per idle key, ``FILE: KEY is set (...) but has no effect ...``."""
        return [f"{file}: {k.message}" if file else k.message for k in self.idle]


def preflight(
    scenario: Scenario,
    *,
    out: str | Path | None = None,
    out_key: str = "output.dir",
    concurrent: int = 1,
    file: str | None = None,
) -> Preflight:
    """Run the checks above (output location only when ``out`` is given)."""
    try:
        device = device_name(scenario.training.device)
        footprint = estimate(scenario)
        limit, source = memory_limit()
        check_memory(footprint, limit=limit, source=source, concurrent=concurrent)
        check_partition(scenario, footprint)
        if device == "cuda":
            check_gpu_memory(footprint, device)
        if out is not None:
            check_output(Path(out) / scenario.name, key=out_key, value=str(out))
            check_results_tree(out, scenario.name, key=out_key, value=str(out))
    except ScenarioError as err:
        raise (err.with_file(file) if file else err) from None
    return Preflight(footprint, limit, source, device, tuple(idle_keys(scenario)))


def check_partition(scenario: Scenario, footprint: Footprint) -> None:
    """Every client gets the partition's ``min_size`` samples (when the sizes are exact)."""
    import fedgame.registry as registry
    from fedgame.data.partition import ChecksCapacity, DeclaresMinSize, check_capacity

    data = footprint.data
    if data is None or not data.exact:
        return
    config = scenario.config("data.partition")
    partition = registry.create("partition", scenario.data.partition.kind, config)
    n = scenario.population.clients
    try:
        if isinstance(partition, ChecksCapacity):
            partition.check_capacity(
                num_train=data.num_train, num_classes=data.num_classes, num_clients=n
            )
        else:
            min_size = config.min_size if isinstance(config, DeclaresMinSize) else 1
            check_capacity(data.num_train, num_clients=n, min_size=min_size)
    except ScenarioError as err:
        raise err.with_prefix("data.partition") from None


def check_memory(footprint: Footprint, *, limit: int, source: str, concurrent: int = 1) -> None:
    """Refuse an estimate (times ``concurrent`` runs at once) above ``limit`` bytes."""
    need = footprint.total
    if need > limit:
        term = footprint.largest()
        raise ScenarioError(
            term.key,
            term.value,
            f"a run that fits in memory: this one would need about {footprint.describe()}, "
            f"more than the {human_bytes(limit)} {source}; try {term.hint}",
        )
    check_concurrency(need, concurrent=concurrent, limit=limit, source=source)


def check_concurrency(per_run: int, *, concurrent: int, limit: int, source: str) -> None:
    """Refuse ``concurrent`` runs of ``per_run`` bytes each at once above ``limit`` bytes."""
    if per_run * concurrent > limit:
        fit = max(1, limit // max(per_run, 1))
        raise ScenarioError(
            "--workers",
            concurrent,
            f"at most {fit} runs of about {human_bytes(per_run)} each fit at once in the "
            f"{human_bytes(limit)} {source}",
        )


def check_gpu_memory(footprint: Footprint, device: str) -> None:
    """The learner's terms against the GPU's free memory."""
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    on_gpu = sum(t.bytes for t in footprint.terms if t.what in ON_DEVICE)
    if on_gpu > free:
        raise ScenarioError(
            "training.device",
            str(device),
            f"the learner would need about {human_bytes(on_gpu)} of GPU memory; "
            f"{human_bytes(free)} is free",
        )


#: footprint terms that live on the training device
ON_DEVICE = ("data", "model", "batches", "evaluation")


def memory_limit() -> tuple[int, str]:
    """``(bytes, description)``: available memory, lowered by ``FEDGAME_MEMORY_LIMIT``."""
    available, source = available_memory()
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if text:
        cap = parse_size(text)
        if cap < available:
            return cap, f"allowed by {MEMORY_LIMIT_ENV}={text}"
    return available, source


def parse_size(text: str) -> int:
    """``"8G" -> 8 GiB``, ``"512M"``, ``"1.5g"``, ``"1000000"`` (bytes)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ScenarioError(MEMORY_LIMIT_ENV, text, "a size such as 8G, 512M or a number of bytes")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def available_memory() -> tuple[int, str]:
    """Memory the OS says a new allocation can get: MemAvailable, or a cgroup's remainder."""
    found: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "available on this machine"))
    except (OSError, ValueError, IndexError):
        pass
    try:
        cap = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = Path("/sys/fs/cgroup/memory.current").read_text().strip()
        if cap != "max":
            found.append((int(cap) - int(used), "left in this cgroup's memory.max"))
    except (OSError, ValueError):
        pass
    if not found:
        pages = os.sysconf("SC_AVPHYS_PAGES") if hasattr(os, "sysconf") else 0
        found.append((pages * os.sysconf("SC_PAGE_SIZE"), "available on this machine"))
    return min(found)


def check_output(folder: str | Path, *, key: str, value: str) -> None:
    """Refuse unless ``folder`` (and its missing parents) can be created and written.

    Walks up from ``folder`` to the first path that exists without following a final
    symbolic link: it must be a folder (not a file, not a link to nothing) that this process
    can write, which is tried by creating and removing an empty folder in it.
    """
    path = Path(os.path.abspath(folder))
    if len(os.fsencode(str(path))) > MAX_OUTPUT_PATH or any(
        len(os.fsencode(part)) > 255 for part in path.parts
    ):
        raise ScenarioError(key, value, f"a folder path under {MAX_OUTPUT_PATH} bytes")
    existing = path
    while not os.path.lexists(existing):
        existing = existing.parent
    if os.path.islink(existing) and not os.path.exists(existing):
        raise ScenarioError(
            key, value, f"a folder fedgame can create; {existing} is a link to nothing"
        )
    if not os.path.isdir(existing):
        raise ScenarioError(key, value, f"a folder fedgame can create; {existing} is a file")
    try:
        if not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".fedgame-check-"))
    except OSError as exc:
        raise ScenarioError(
            key,
            value,
            f"a folder fedgame can write; cannot create folders in {existing} "
            f"({exc.strerror or exc})",
        ) from None


def check_results_tree(root: str | Path, *parts: str, key: str, value: str) -> None:
    """Refuse a link or a non-folder at any existing ``root/parts...`` below ``root`` (the
    results folder the user named, which may itself be a link): fedgame writes only into real
    folders there (:func:`fedgame.run.paths.make_folders`)."""
    from fedgame.run.paths import not_a_real_folder

    path = Path(root)
    for part in parts:
        path = path / part
        if not os.path.lexists(path):
            return
        problem = not_a_real_folder(path)
        if problem:
            raise ScenarioError(key, value, f"a results folder fedgame can write; {path} {problem}")
