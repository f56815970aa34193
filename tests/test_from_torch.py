"""Networks from PyTorch: from_torch on the zoo and on user modules, the --workload forms
(zoo name, file.py:factory, .pt2), `codesign workloads`, and one-line errors for bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from codesign.cli import main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import partition
from codesign.workloads import Conv2D, Conv2DTranspose, Dense, from_torch, get_workload

HW1 = HwConfig()
HW4 = HwConfig.resolve("pynq_4x8")

NET = textwrap.dedent("""
    import torch
    from torch import nn

    def build():
        net = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1, groups=2),
                            nn.Conv2d(32, 32, 3, 1, 2, dilation=2), nn.Conv2d(32, 32, 3, 1, 1, groups=32),
                            nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.Flatten(), nn.Linear(16 * 16 * 16, 64))
        return net, (torch.zeros(2, 3, 8, 8),)

    def broken():
        raise RuntimeError("no weights here")

    def untraceable():  # the example input does not fit the module: nothing can trace or run it
        return nn.Linear(16, 8), (torch.zeros(1, 32),)

    class Out:
        def __init__(self, y):
            self.y = y

    class Custom(nn.Module):  # data-dependent branch and a custom output type: export and fx fail
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(16, 32, 3, 1, 1), nn.Linear(32, 16)

        def forward(self, x):
            y = self.conv(x).mean((2, 3))
            if (y * 0).sum() == 0:  # data-dependent (always true)
                y = self.fc(y)
            return Out(y)

    def custom():
        return Custom(), (torch.zeros(1, 16, 8, 8),)

    def nothing():
        return nn.ReLU(), (torch.zeros(1, 16),)
""")


@pytest.fixture()
def netfile(tmp_path):
    path = tmp_path / "net.py"
    path.write_text(NET)
    return path


def test_layers_and_classification(netfile):
    wl = get_workload(f"{netfile}:build")
    assert wl.batch == 2 and wl.name == "net_build"
    layers = [layer for layer, _ in wl.entries]
    assert layers == [Conv2D(2, 3, 8, 8, 32, 3, 3, 1, 1), Conv2D(2, 32, 8, 8, 32, 3, 3, 1, 1, groups=2),
                      Conv2D(2, 32, 8, 8, 32, 3, 3, 1, 2, dilation=2), Conv2D(2, 32, 8, 8, 32, 3, 3, 1, 1, groups=32),
                      Conv2DTranspose(2, 32, 8, 8, 16, 4, 4, 2, 1), Dense(2, 4096, 64)]
    vta, cpu = partition(wl.for_hw(HW1), HW1)
    reasons = {layer: r for layer, _, r in cpu}
    assert reasons[layers[0].with_batch(2)] == "in_channels=3 is not a multiple of BLOCK_IN=16"
    assert reasons[layers[2]].startswith("dilation=2")
    assert reasons[layers[3]].startswith("depthwise (groups=32 = in_channels)")
    assert len(cpu) == 3
    assert {layer.template for layer, _ in vta} == {"group_conv2d_packed.vta", "conv2d_transpose_packed.vta",
                                                    "dense_packed.vta"}


def test_zoo_networks_use_the_new_templates():
    mobile = get_workload("mobilenet")
    groups = sorted({layer.groups for layer, _ in mobile.entries if isinstance(layer, Conv2D) and layer.groups > 1})
    assert groups == [2, 4, 8, 16, 32, 64]  # MobileNet-G: 16 channels per group (tophub groups 2..64)
    vta, _ = partition(mobile, HW1)
    assert sum(layer.template == "group_conv2d_packed.vta" for layer, _ in vta) == 9
    dcgan = get_workload("dcgan")
    vta, cpu = partition(dcgan.for_hw(HW4), HW4)
    assert [layer for layer, _ in vta] == [Conv2DTranspose(4, 512, 4, 4, 256, 4, 4, 2, 1),
                                           Conv2DTranspose(4, 256, 8, 8, 128, 4, 4, 2, 1),
                                           Conv2DTranspose(4, 128, 16, 16, 64, 4, 4, 2, 1)]
    assert len(cpu) == 2  # z=100 input channels; 3 output channels
    tr = get_workload("transformer")
    assert [op.reason for op, _ in tr.cpu_ops] == ["matmul of two activations: dense_packed.vta needs a weight operand"] * 2
    r50 = get_workload("resnet50")
    assert len(partition(r50, HW1)[0]) == 22  # tophub holds 22 ResNet-50 conv2d workloads (docs/vta.md §9)


def test_module_that_does_not_export_falls_back(netfile):
    wl = get_workload(f"{netfile}:custom")
    assert [layer for layer, _ in wl.entries] == [Conv2D(1, 16, 8, 8, 32, 3, 3, 1, 1), Dense(1, 32, 16)]


def test_module_that_does_not_export_is_traced_by_fx(monkeypatch):
    from torch import nn

    from codesign.workloads import torch_import

    class Peek(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(16, 32, 3, 1, 1), nn.Linear(32, 16)

        def forward(self, x):
            x.numpy()  # a host-side peek: torch.export cannot trace it, torch.fx records it
            return self.fc(self.conv(x).mean((2, 3)))

    def no_eager(*args):
        raise AssertionError("the eager fallback must not be needed")

    monkeypatch.setattr(torch_import, "_eager_calls", no_eager)
    wl = from_torch(Peek(), torch.zeros(1, 16, 8, 8), name="peek")
    assert [layer for layer, _ in wl.entries] == [Conv2D(1, 16, 8, 8, 32, 3, 3, 1, 1), Dense(1, 32, 16)]


def test_pt2_file(tmp_path):
    net = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, 1, 1), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 1, 1, 0))
    ep = torch.export.export(net, (torch.zeros(1, 16, 8, 8),))
    path = tmp_path / "small.pt2"
    torch.export.save(ep, str(path))
    wl = get_workload(str(path))
    assert wl.name == "small" and [layer for layer, _ in wl.entries] == [
        Conv2D(1, 16, 8, 8, 32, 3, 3, 1, 1), Conv2D(1, 32, 8, 8, 32, 1, 1, 1, 0)]
    assert from_torch(net, torch.zeros(1, 16, 8, 8)).entries == wl.entries


@pytest.mark.parametrize("spec, match", [
    ("missing.py:build", "workload file 'missing.py' does not exist"),
    ("{net}:broken", "workload factory .* raised RuntimeError: no weights here"),
    ("{net}:nope", "has no function 'nope'; functions: Custom, Out, broken, build, custom, nothing, untraceable"),
    ("{net}:untraceable", "does not trace .torch.export, torch.fx. nor run on its example inputs: mat1 and mat2"),
    ("{net}:nothing", "nothing VTA could offload"),
    ("missing.pt2", "workload file 'missing.pt2' does not exist"),
    ("{dir}/bad.pt2", "is not a torch.export .pt2 archive"),
    ("resnet99", "unknown workload 'resnet99'; allowed: a zoo name"),
])
def test_bad_inputs_are_one_line(netfile, tmp_path, capsys, spec, match):
    (tmp_path / "bad.pt2").write_bytes(b"not a zip")
    spec = spec.format(net=netfile, dir=tmp_path)
    with pytest.raises(ConfigError, match=match):
        get_workload(spec)
    assert main(["workloads", spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("codesign workloads: error:")


def test_nothing_offloadable_on_this_hardware_is_one_line(tmp_path, capsys):
    path = tmp_path / "cpu_only.py"
    path.write_text("import torch\ndef f():\n    return torch.nn.ReLU(), (torch.zeros(1, 3, 8, 8),)\n")
    assert main(["tune", "--workload", f"{path}:f", "--tuner", "random", "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing to tune" in err and "asks VTA about no layer" in err


def test_cli_workloads(capsys):
    assert main(["workloads"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("resnet50", "mobilenet", "dcgan", "vgg16", "alexnet", "lstm"))
    assert main(["workloads", "dcgan", "--hw", "pynq_1x16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unique_offloaded"] == 3 and doc["unique_layers"] == 5
    assert doc["macs_offloaded"] == sum(x["macs"] for x in doc["layers"] if x["offloaded"])
    assert doc["macs_cpu"] > 0
    assert main(["workloads", "lstm", "--hw", "pynq_4x8"]) == 0
    out = capsys.readouterr().out
    assert "dense_4x512_1024" in out and "VTA dense_packed.vta" in out


def test_a_bad_pt2_is_one_line_in_a_real_process(tmp_path):
    # torch.export.load logs its own traceback through `logging` (not seen by capsys) before raising.
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    out = subprocess.run([sys.executable, "-m", "codesign.cli", "workloads", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "is not a torch.export .pt2 archive" in out.stderr, out.stderr
