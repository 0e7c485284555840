"""Collectives on a device their backend holds (issue 31, item 3), on CPU.

NCCL cannot run here, so a recording fake of ``torch.distributed`` stands in for the process group:
it remembers the backend the code declared at ``init_process_group`` and refuses, as NCCL does, a
tensor on a device that backend does not hold. The fake's own table of what each backend holds is
written out here, independent of the code under test."""

from __future__ import annotations

import pytest
import torch

from trainers import parallel
from trainers.grpo_state import DistInfo, backend_devices, backend_for
from wiki_sim.common.errors import UserError

HOLDS = {"nccl": {"cuda"}, "gloo": {"cpu", "cuda"}}
"""What each backend reduces (torch's documentation: NCCL CUDA tensors only; gloo CPU and CUDA)."""


def _holds(backend: str) -> set[str]:
    """Device types a backend string reduces: a name, or ``device:name`` pairs."""
    if ":" not in backend:
        return HOLDS[backend]
    pairs = [pair.split(":") for pair in backend.split(",")]
    return {device for device, name in pairs if device in HOLDS[name]}


class FakeProcessGroup:
    """``init_process_group``, ``is_initialized``, ``get_backend_config`` and ``all_reduce`` of one
    process of a two-process job; ``all_reduce`` records each tensor's device and checks it."""

    def __init__(self, monkeypatch, *, cuda: bool, started: str | None = None):
        self.backend = started
        self.calls: list[tuple[str, str]] = []
        self.set_devices: list[int] = []
        dist = torch.distributed
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "set_device", self.set_devices.append)
        monkeypatch.setattr(dist, "init_process_group", self.init_process_group)
        monkeypatch.setattr(dist, "is_initialized", lambda: self.backend is not None)
        monkeypatch.setattr(dist, "get_backend_config", lambda group=None: self.backend)
        monkeypatch.setattr(dist, "all_reduce", self.all_reduce)
        for key, value in (("WORLD_SIZE", "2"), ("RANK", "1"), ("LOCAL_RANK", "1")):
            monkeypatch.setenv(key, value)

    def init_process_group(self, backend=None, **kwargs):
        assert self.backend is None, "the process group was started twice"
        self.backend = backend

    def all_reduce(self, tensor, op=None, group=None, async_op=False):
        assert self.backend is not None, "a collective before init_process_group"
        kind = tensor.device.type
        self.calls.append((kind, str(op)))
        if kind not in _holds(self.backend):  # NCCL's own words on a GPU host
            raise RuntimeError(f"No backend type associated with device type {kind}")


@pytest.mark.parametrize("device, cuda, expected", [
    ("cpu", False, "gloo"), ("cpu", True, "gloo"), ("auto", False, "gloo"),
    ("cuda", True, "cpu:gloo,cuda:nccl"), ("auto", True, "cpu:gloo,cuda:nccl"),
])
def test_from_env_starts_the_backend_the_device_asks_for(monkeypatch, device, cuda, expected):
    fake = FakeProcessGroup(monkeypatch, cuda=cuda)
    info = DistInfo.from_env(device)
    assert fake.backend == info.backend == expected and info.world_size == 2 and info.rank == 1
    assert fake.set_devices == ([1] if "nccl" in expected else [])  # the rank's own GPU before NCCL starts
    assert info.collective_device == torch.device("cpu")


def test_every_collective_of_the_trainers_goes_where_its_backend_holds_it(monkeypatch):
    """On a (faked) GPU host with --device cuda: the step's sums, metric dicts and FSDP's pass count
    reach the backend on a device it holds. Before the fix the group was NCCL-only and these were
    CPU tensors: the fake raised what NCCL raised on an H200."""
    fake = FakeProcessGroup(monkeypatch, cuda=True)
    info = DistInfo.from_env("cuda")
    assert info.all_reduce_sum(3.0) == 3.0
    assert info.all_reduce_dict({"b": 2.0, "a": 1.0}) == {"a": 1.0, "b": 2.0}
    assert parallel.pass_count(torch.nn.Linear(1, 1), info, 4, always=True) == 4
    assert [kind for kind, _ in fake.calls] == ["cpu", "cpu", "cpu"]
    assert "MAX" in fake.calls[-1][1].upper()


def test_the_fake_catches_a_cpu_tensor_sent_to_nccl(monkeypatch):
    """The check itself: what the old code did (a CPU tensor to an NCCL-only group) fails here."""
    fake = FakeProcessGroup(monkeypatch, cuda=True, started="nccl")
    with pytest.raises(RuntimeError, match="device type cpu"):
        torch.distributed.all_reduce(torch.zeros(1))
    assert fake.calls == [("cpu", "None")]


def test_a_group_that_cannot_hold_the_device_is_one_line_naming_device(monkeypatch):
    FakeProcessGroup(monkeypatch, cuda=True, started="nccl")  # started by someone else, NCCL only
    with pytest.raises(UserError, match="--device") as err:
        DistInfo.from_env("cpu")
    assert "\n" not in str(err.value)
    info = DistInfo.from_env("cuda")  # kept: it holds CUDA tensors, and this class's reductions go there
    assert info.backend == "nccl" and info.collective_device == torch.device("cuda", 1)
    with pytest.raises(UserError, match=r"--device cpu.*'gloo'") as err:
        info.check_placement(torch.zeros(1))
    assert "\n" not in str(err.value)


def test_cuda_without_cuda_is_one_line_before_any_process_group(monkeypatch):
    fake = FakeProcessGroup(monkeypatch, cuda=False)
    with pytest.raises(UserError, match=r"--device cuda .*CUDA is not available.*--device cpu") as err:
        DistInfo.from_env("cuda")
    assert "\n" not in str(err.value) and fake.backend is None
    with pytest.raises(UserError, match="--device cuda"):
        DistInfo().device("cuda")
    with pytest.raises(UserError, match="not a torch device"):
        backend_for("gpu")


def test_backend_devices_reads_names_and_pairs():
    assert backend_devices("nccl") == {"cuda"}
    assert backend_devices("gloo") == {"cpu", "cuda"}
    assert backend_devices("cpu:gloo,cuda:nccl") == {"cpu", "cuda"}
    assert backend_devices("cuda:nccl") == {"cuda"}


def test_one_process_reduces_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.distributed, "all_reduce", lambda *a, **k: pytest.fail("no collective alone"))
    info = DistInfo.from_env("cpu")
    assert info.backend == "" and not info.active
    assert info.all_reduce_sum(2.0) == 2.0 and parallel.pass_count(torch.nn.Linear(1, 1), info, 2, always=True) == 2


def test_cli_device_cuda_without_cuda_is_one_line_before_loading(tmp_path, capsys, monkeypatch):
    from websailor.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "q", "answer": "a"}\n')
    rc = main(["grpo", str(tmp_path / "no-model"), str(tasks), "--device", "cuda"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--device cuda" in err[0] and "no-model" not in err[0]
