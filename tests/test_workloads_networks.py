"""Built-in (zoo) workloads: ResNet-18 from torch equals the layer list of issue 3, GEMM workloads,
batch handling."""

from __future__ import annotations

import pytest

from codesign.errors import ConfigError
from codesign.hw.config import HwConfig
from codesign.schedule import partition, unsupported_reason
from codesign.workloads import WORKLOADS, Conv2D, Dense, Workload, get_workload

HW1 = HwConfig()
HW4 = HwConfig.from_name("pynq_4x8_i8w8a32_15_16_16_18")

# (H=W in, C, O, kernel, stride, pad, count): the ResNet-18 layers of the tophub log (docs/vta.md §9)
RESNET18 = [
    (56, 64, 64, 3, 1, 1, 4), (56, 64, 128, 3, 2, 1, 1), (56, 64, 128, 1, 2, 0, 1),
    (28, 128, 128, 3, 1, 1, 3), (28, 128, 256, 3, 2, 1, 1), (28, 128, 256, 1, 2, 0, 1),
    (14, 256, 256, 3, 1, 1, 3), (14, 256, 512, 3, 2, 1, 1), (14, 256, 512, 1, 2, 0, 1),
    (7, 512, 512, 3, 1, 1, 3),
]


def test_resnet18_from_torch_matches_issue():
    """The offloaded part of from_torch(ResNet-18) is exactly the list issue 3 gave by hand; the
    7x7 stem (3 channels) and the 512 -> 1000 classifier stay on the CPU of pynq_1x16."""
    wl = get_workload("resnet18")
    want = [(Conv2D(1, c, h, h, o, k, k, s, p), n) for h, c, o, k, s, p, n in RESNET18]
    vta, cpu = partition(wl, HW1)
    assert sorted(vta, key=repr) == sorted(want, key=repr)
    assert wl.batch == 1
    assert sum(n for _, n in vta) == 19
    offloaded = sum(layer.macs * n for layer, n in vta)
    # by hand: 4 x 115605504 + 3 x 57802752 (3x3 s2) + 3 x 6422528 (1x1 s2) + 9 x 115605504
    assert offloaded == 4 * 115_605_504 + 3 * 57_802_752 + 3 * 6_422_528 + 9 * 115_605_504
    assert [(layer, n) for layer, n, _ in cpu] == [(Conv2D(1, 3, 224, 224, 64, 7, 7, 2, 3), 1), (Dense(1, 512, 1000), 1)]
    assert "in_channels=3 is not a multiple of BLOCK_IN=16" in cpu[0][2]
    assert wl.total_macs == offloaded + 118_013_952 + 512_000  # + stem 64x112x112x3x7x7 + fc


def test_gemm_workloads():
    lstm = get_workload("lstm")
    assert lstm.unique_layers() == [(Dense(1, 512, 1024), 1)]
    tr = get_workload("transformer")
    assert tr.unique_layers() == [(Dense(16, 512, 512), 4), (Dense(16, 512, 2048), 1), (Dense(16, 2048, 512), 1)]
    for wl in (lstm, tr):
        assert all(unsupported_reason(layer, HW1) is None for layer in wl.layers)
        assert all(unsupported_reason(layer, HW4) is None for layer in wl.for_hw(HW4).layers)


def test_batch_handling():
    wl = get_workload("resnet18")
    w4 = wl.for_hw(HW4)
    assert w4.batch == 4 and all(layer.batch == 4 for layer in w4.layers)
    assert wl.for_hw(HW1) is wl
    assert wl.with_batch(2).for_hw(HW4).batch == 4
    assert w4.total_macs == 4 * wl.total_macs
    tr = get_workload("transformer")
    assert tr.for_hw(HW4).batch == 1  # 16 tokens are already a multiple of BATCH=4
    assert [layer.batch for layer in tr.with_batch(3).layers] == [48, 48, 48]
    assert get_workload("lstm").for_hw(HW4).layers[0] == Dense(4, 512, 1024)


def test_unique_layers_merges_repeats_and_partition():
    a, b = Conv2D(1, 16, 8, 8, 16, 3, 3, 1, 1), Conv2D(1, 3, 8, 8, 16, 3, 3, 1, 1)
    wl = Workload("t", ((a, 2), (b, 1), (a, 3)))
    assert wl.unique_layers() == [(a, 5), (b, 1)]
    vta, cpu = partition(wl, HW1)
    assert vta == [(a, 5)]
    assert cpu[0][:2] == (b, 1) and "BLOCK_IN=16" in cpu[0][2]
    wl2 = Workload("s", (("dense:1,16,16", 1),))  # specs are parsed
    assert wl2.layers == [Dense(1, 16, 16)]


def test_workload_errors():
    with pytest.raises(ConfigError, match="unknown workload 'vgg19'; allowed: a zoo name"):
        get_workload("vgg19")
    assert get_workload("ResNet-18").name == "resnet18"
    assert set(WORKLOADS) == {"resnet18", "resnet34", "resnet50", "vgg16", "alexnet", "mobilenet", "dcgan",
                              "transformer", "lstm"}
    with pytest.raises(ConfigError, match="count"):
        Workload("x", ((Dense(1, 16, 16), 0),))
    with pytest.raises(ConfigError, match="batch"):
        get_workload("lstm").with_batch(0)
