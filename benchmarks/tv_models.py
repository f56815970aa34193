"""torchvision's classification architectures re-implemented in plain torch.nn (no torchvision import:
its wheels do not import against the CPU torch we use, and it must not become a dependency).

Each network is built layer for layer as torchvision builds it at its default config — the same
channel counts, strides, block structure, activations, squeeze-excite blocks, layer norms — and
uses ops the way torchvision does (ShuffleNet's channel shuffle via view/transpose/view, ConvNeXt's
permute + LayerNorm + layer scale + GELU, ViT's class token + positional embedding +
nn.MultiheadAttention, Swin's padded window partition, torch.roll shifted windows, attention mask
and relative position bias), so the benchmark exercises the ops real models use. Inference only:
dropout is nn.Dropout (identity in eval), stochastic depth is the identity (what torchvision's
StochasticDepth computes in eval), auxiliary classifiers are left out (GoogLeNet, Inception-v3).

`MODELS[name]()` -> (module.eval(), (example_input,)): weights are PyTorch's default initialisation
under `torch.manual_seed(seed)` (seeded random weights, not trained ones; batch norm running
statistics at their defaults), the input a seeded standard-normal batch of 1 at 224x224 (299x299
for Inception-v3, as torchvision). Every factory is also a `--workload` spec:
`benchmarks/tv_models.py:resnet18`.

`PUBLISHED_PARAMS` holds torchvision's published parameter counts; `python benchmarks/tv_models.py`
checks every model against them (and runs a forward pass with `--forward`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# ---------------------------------------------------------------------------------------------
# shared building blocks (torchvision.ops.misc / torchvision.models._utils)


def make_divisible(v: float, divisor: int, min_value: int | None = None) -> int:
    """torchvision's `_make_divisible`: round to a multiple of `divisor`, never below 90% of `v`."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNAct(nn.Sequential):
    """torchvision's Conv2dNormActivation: conv (padding (k-1)//2, bias only without a norm), norm,
    activation (None: no activation)."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int] = 3, stride: int = 1,
                 padding: int | tuple[int, int] | None = None, groups: int = 1,
                 norm: Callable[[int], nn.Module] | None = nn.BatchNorm2d,
                 act: Callable[[], nn.Module] | None = nn.ReLU, bias: bool | None = None) -> None:
        if padding is None:
            padding = (kernel - 1) // 2 if isinstance(kernel, int) else tuple((k - 1) // 2 for k in kernel)
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups,
                                             bias=norm is None if bias is None else bias)]
        if norm is not None:
            layers.append(norm(cout))
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """torchvision.ops.SqueezeExcitation: global average pool, 1x1 conv, activation, 1x1 conv,
    scale activation, times the input."""

    def __init__(self, channels: int, squeeze: int, act: Callable[[], nn.Module] = nn.ReLU,
                 scale_act: Callable[[], nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = act()
        self.scale_activation = scale_act()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


class Residual(nn.Module):
    """`x + body(x)` when `use` (stride 1, same channels), else `body(x)`: the inverted-residual
    blocks of MobileNet-v2/v3, EfficientNet and MNASNet (stochastic depth is the identity in eval)."""

    def __init__(self, body: nn.Module, use: bool) -> None:
        super().__init__()
        self.block = body
        self.use_res_connect = use

    def forward(self, x: Tensor) -> Tensor:
        return x + self.block(x) if self.use_res_connect else self.block(x)


def inverted_residual(cin: int, expanded: int, cout: int, kernel: int, stride: int,
                      act: Callable[[], nn.Module], norm: Callable[[int], nn.Module] = nn.BatchNorm2d,
                      se: nn.Module | None = None) -> Residual:
    """1x1 expansion (skipped when it would not expand), kxk depthwise, optional squeeze-excite,
    1x1 linear projection; residual when stride 1 and cin == cout."""
    layers: list[nn.Module] = []
    if expanded != cin:
        layers.append(ConvBNAct(cin, expanded, 1, norm=norm, act=act))
    layers.append(ConvBNAct(expanded, expanded, kernel, stride, groups=expanded, norm=norm, act=act))
    if se is not None:
        layers.append(se)
    layers.append(ConvBNAct(expanded, cout, 1, norm=norm, act=None))
    return Residual(nn.Sequential(*layers), stride == 1 and cin == cout)


class Classifier(nn.Module):
    """features -> global average pool -> flatten -> head (the common tail of torchvision's CNNs;
    ConvNeXt's head flattens itself, after its LayerNorm2d: `flatten=False`)."""

    def __init__(self, features: nn.Module, head: nn.Module, flatten: bool = True) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = head
        self.flatten = flatten

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1) if self.flatten else x)


class Permute(nn.Module):
    """torchvision.ops.Permute."""

    def __init__(self, dims: Sequence[int]) -> None:
        super().__init__()
        self.dims = list(dims)

    def forward(self, x: Tensor) -> Tensor:
        return torch.permute(x, self.dims)


class MLP(nn.Sequential):
    """torchvision.ops.MLP with one hidden layer: Linear, activation, Dropout, Linear, Dropout."""

    def __init__(self, dim: int, hidden: int, act: Callable[[], nn.Module] = nn.GELU, dropout: float = 0.0) -> None:
        super().__init__(nn.Linear(dim, hidden), act(), nn.Dropout(dropout), nn.Linear(hidden, dim), nn.Dropout(dropout))


# ---------------------------------------------------------------------------------------------
# ResNet, ResNeXt, Wide ResNet


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class Bottleneck(nn.Module):
    """ResNet v1.5: the stride on the 3x3 conv; width = planes * base_width / 64 * groups."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
                 groups: int = 1, base_width: int = 64) -> None:
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: Sequence[int], groups: int = 1,
                 width_per_group: int = 64, num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes, self.groups, self.base_width = 64, groups, width_per_group
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block: Any, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes, groups=self.groups, base_width=self.base_width) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---------------------------------------------------------------------------------------------
# MobileNet-v2, MobileNet-v3 large, EfficientNet-B0, MNASNet 1.0


def build_mobilenet_v2(num_classes: int = 1000) -> nn.Module:
    settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    cin = make_divisible(32, 8)
    layers: list[nn.Module] = [ConvBNAct(3, cin, 3, 2, act=nn.ReLU6)]
    for t, c, n, s in settings:
        cout = make_divisible(c, 8)
        for i in range(n):
            layers.append(inverted_residual(cin, int(round(cin * t)), cout, 3, s if i == 0 else 1, nn.ReLU6))
            cin = cout
    layers.append(ConvBNAct(cin, 1280, 1, act=nn.ReLU6))
    return Classifier(nn.Sequential(*layers), nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes)))


def build_mobilenet_v3_large(num_classes: int = 1000) -> nn.Module:
    norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
    # input, kernel, expanded, output, squeeze-excite, activation, stride
    settings = ((16, 3, 16, 16, False, "RE", 1), (16, 3, 64, 24, False, "RE", 2), (24, 3, 72, 24, False, "RE", 1),
                (24, 5, 72, 40, True, "RE", 2), (40, 5, 120, 40, True, "RE", 1), (40, 5, 120, 40, True, "RE", 1),
                (40, 3, 240, 80, False, "HS", 2), (80, 3, 200, 80, False, "HS", 1), (80, 3, 184, 80, False, "HS", 1),
                (80, 3, 184, 80, False, "HS", 1), (80, 3, 480, 112, True, "HS", 1), (112, 3, 672, 112, True, "HS", 1),
                (112, 5, 672, 160, True, "HS", 2), (160, 5, 960, 160, True, "HS", 1), (160, 5, 960, 160, True, "HS", 1))
    layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, norm=norm, act=nn.Hardswish)]
    for cin, k, exp, cout, use_se, a, s in settings:
        se = SqueezeExcite(exp, make_divisible(exp // 4, 8), scale_act=nn.Hardsigmoid) if use_se else None
        layers.append(inverted_residual(cin, exp, cout, k, s, nn.Hardswish if a == "HS" else nn.ReLU, norm, se))
    layers.append(ConvBNAct(160, 960, 1, norm=norm, act=nn.Hardswish))
    head = nn.Sequential(nn.Linear(960, 1280), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1280, num_classes))
    return Classifier(nn.Sequential(*layers), head)


def build_efficientnet_b0(num_classes: int = 1000) -> nn.Module:
    # expand ratio, kernel, stride, input, output, layers (width and depth multipliers 1.0)
    settings = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
                (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))
    layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.SiLU)]
    for e, k, s, cin, cout, n in settings:
        stage = []
        for i in range(n):
            c = cin if i == 0 else cout
            exp = make_divisible(c * e, 8)
            se = SqueezeExcite(exp, max(1, c // 4), act=nn.SiLU)
            stage.append(inverted_residual(c, exp, cout, k, s if i == 0 else 1, nn.SiLU, se=se))
        layers.append(nn.Sequential(*stage))
    layers.append(ConvBNAct(320, 1280, 1, act=nn.SiLU))
    return Classifier(nn.Sequential(*layers), nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes)))


class MNASNet(nn.Module):
    """MNASNet 1.0: torchvision puts the layers in `self.layers` and pools with x.mean([2, 3])."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        norm = partial(nn.BatchNorm2d, momentum=1 - 0.9997)
        d = (32, 16, 24, 40, 80, 96, 192, 320)
        layers: list[nn.Module] = [ConvBNAct(3, d[0], 3, 2, norm=norm),
                                   ConvBNAct(d[0], d[0], 3, 1, groups=d[0], norm=norm),
                                   ConvBNAct(d[0], d[1], 1, norm=norm, act=None)]
        # input, output, kernel, stride, expansion, repeats
        for cin, cout, k, s, e, n in ((d[1], d[2], 3, 2, 3, 3), (d[2], d[3], 5, 2, 3, 3), (d[3], d[4], 5, 2, 6, 3),
                                      (d[4], d[5], 3, 1, 6, 2), (d[5], d[6], 5, 2, 6, 4), (d[6], d[7], 3, 1, 6, 1)):
            layers.append(nn.Sequential(*(inverted_residual(cin if i == 0 else cout, (cin if i == 0 else cout) * e, cout, k,
                                                            s if i == 0 else 1, nn.ReLU, norm) for i in range(n))))
        layers.append(ConvBNAct(d[7], 1280, 1, norm=norm))
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


# ---------------------------------------------------------------------------------------------
# SqueezeNet 1.1, GoogLeNet, Inception-v3, DenseNet-121


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat([self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1: ceil-mode max pools; the classifier is a 1x1 conv, ReLU and global average pool."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        pool = partial(nn.MaxPool2d, 3, 2, ceil_mode=True)
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(),
            Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
            Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
            Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(512, num_classes, 1), nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x: Tensor) -> Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def basic_conv(cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1,
               padding: int | tuple[int, int] = 0) -> ConvBNAct:
    """GoogLeNet's / Inception-v3's BasicConv2d: conv without bias, batch norm (eps 0.001), ReLU."""
    return ConvBNAct(cin, cout, kernel, stride, padding, norm=partial(nn.BatchNorm2d, eps=0.001))


class GoogLeNetInception(nn.Module):
    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool_proj: int) -> None:
        super().__init__()
        self.branch1 = basic_conv(cin, c1, 1)
        self.branch2 = nn.Sequential(basic_conv(cin, c3r, 1), basic_conv(c3r, c3, 3, padding=1))
        # torchvision's "5x5" branch is a 3x3 conv (a known quirk kept for its weights)
        self.branch3 = nn.Sequential(basic_conv(cin, c5r, 1), basic_conv(c5r, c5, 3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), basic_conv(cin, pool_proj, 1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    """aux_logits=False, transform_input=False."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        inc, pool = GoogLeNetInception, partial(nn.MaxPool2d, ceil_mode=True)
        self.features = nn.Sequential(
            basic_conv(3, 64, 7, 2, 3), pool(3, 2), basic_conv(64, 64, 1), basic_conv(64, 192, 3, padding=1), pool(3, 2),
            inc(192, 64, 96, 128, 16, 32, 32), inc(256, 128, 128, 192, 32, 96, 64), pool(3, 2),
            inc(480, 192, 96, 208, 16, 48, 64), inc(512, 160, 112, 224, 24, 64, 64), inc(512, 128, 128, 256, 24, 64, 64),
            inc(512, 112, 144, 288, 32, 64, 64), inc(528, 256, 160, 320, 32, 128, 128), pool(2, 2),
            inc(832, 256, 160, 320, 32, 128, 128), inc(832, 384, 192, 384, 48, 128, 128))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.dropout(torch.flatten(self.avgpool(self.features(x)), 1)))


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = basic_conv(cin, 64, 1)
        self.branch5x5 = nn.Sequential(basic_conv(cin, 48, 1), basic_conv(48, 64, 5, padding=2))
        self.branch3x3dbl = nn.Sequential(basic_conv(cin, 64, 1), basic_conv(64, 96, 3, padding=1),
                                          basic_conv(96, 96, 3, padding=1))
        self.branch_pool = basic_conv(cin, pool_features, 1)

    def forward(self, x: Tensor) -> Tensor:
        pool = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.branch1x1(x), self.branch5x5(x), self.branch3x3dbl(x), pool], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = basic_conv(cin, 384, 3, 2)
        self.branch3x3dbl = nn.Sequential(basic_conv(cin, 64, 1), basic_conv(64, 96, 3, padding=1), basic_conv(96, 96, 3, 2))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch3x3(x), self.branch3x3dbl(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, c7: int) -> None:
        super().__init__()
        self.branch1x1 = basic_conv(cin, 192, 1)
        self.branch7x7 = nn.Sequential(basic_conv(cin, c7, 1), basic_conv(c7, c7, (1, 7), padding=(0, 3)),
                                       basic_conv(c7, 192, (7, 1), padding=(3, 0)))
        self.branch7x7dbl = nn.Sequential(
            basic_conv(cin, c7, 1), basic_conv(c7, c7, (7, 1), padding=(3, 0)), basic_conv(c7, c7, (1, 7), padding=(0, 3)),
            basic_conv(c7, c7, (7, 1), padding=(3, 0)), basic_conv(c7, 192, (1, 7), padding=(0, 3)))
        self.branch_pool = basic_conv(cin, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        pool = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.branch1x1(x), self.branch7x7(x), self.branch7x7dbl(x), pool], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = nn.Sequential(basic_conv(cin, 192, 1), basic_conv(192, 320, 3, 2))
        self.branch7x7x3 = nn.Sequential(basic_conv(cin, 192, 1), basic_conv(192, 192, (1, 7), padding=(0, 3)),
                                         basic_conv(192, 192, (7, 1), padding=(3, 0)), basic_conv(192, 192, 3, 2))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch3x3(x), self.branch7x7x3(x), F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch1x1 = basic_conv(cin, 320, 1)
        self.branch3x3_1 = basic_conv(cin, 384, 1)
        self.branch3x3_2a = basic_conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = basic_conv(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = nn.Sequential(basic_conv(cin, 448, 1), basic_conv(448, 384, 3, padding=1))
        self.branch3x3dbl_3a = basic_conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = basic_conv(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = basic_conv(cin, 192, 1)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_1(x)
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        pool = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([self.branch1x1(x), b3, bd, pool], 1)


class Inception3(nn.Module):
    """aux_logits=False (torchvision's published 27,161,264 parameters include the AuxLogits head's
    3,326,696), transform_input=False, 299x299 input."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            basic_conv(3, 32, 3, 2), basic_conv(32, 32, 3), basic_conv(32, 64, 3, padding=1), nn.MaxPool2d(3, 2),
            basic_conv(64, 80, 1), basic_conv(80, 192, 3), nn.MaxPool2d(3, 2),
            InceptionA(192, 32), InceptionA(256, 64), InceptionA(288, 64), InceptionB(288),
            InceptionC(768, 128), InceptionC(768, 160), InceptionC(768, 160), InceptionC(768, 192),
            InceptionD(768), InceptionE(1280), InceptionE(2048))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.flatten(self.dropout(self.avgpool(self.features(x))), 1))


class DenseLayer(nn.Module):
    """Pre-activation bottleneck: BN, ReLU, 1x1 conv (4 x growth), BN, ReLU, 3x3 conv (growth)."""

    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.norm1, self.relu1 = nn.BatchNorm2d(cin), nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2, self.relu2 = nn.BatchNorm2d(bn_size * growth), nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, features: list[Tensor]) -> Tensor:
        x = self.conv1(self.relu1(self.norm1(torch.cat(features, 1))))
        return self.conv2(self.relu2(self.norm2(x)))


class DenseBlock(nn.ModuleDict):
    def __init__(self, n: int, cin: int, growth: int, bn_size: int) -> None:
        super().__init__({f"denselayer{i + 1}": DenseLayer(cin + i * growth, growth, bn_size) for i in range(n)})

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    def __init__(self, growth: int = 32, blocks: Sequence[int] = (6, 12, 24, 16), init: int = 64, bn_size: int = 4,
                 num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, init, 7, 2, 3, bias=False), nn.BatchNorm2d(init), nn.ReLU(inplace=True),
                                   nn.MaxPool2d(3, 2, 1)]
        c = init
        for i, n in enumerate(blocks):
            layers.append(DenseBlock(n, c, growth, bn_size))
            c += n * growth
            if i != len(blocks) - 1:  # transition: BN, ReLU, 1x1 conv halving the channels, 2x2 average pool
                layers += [nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False),
                                         nn.AvgPool2d(2, 2))]
                c //= 2
        layers.append(nn.BatchNorm2d(c))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = F.adaptive_avg_pool2d(F.relu(self.features(x), inplace=True), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---------------------------------------------------------------------------------------------
# ShuffleNet-v2 x1.0, RegNetY-400MF


def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        bf = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(ConvBNAct(cin, cin, 3, stride, 1, groups=cin, act=None),
                                         ConvBNAct(cin, bf, 1))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(ConvBNAct(cin if stride > 1 else bf, bf, 1),
                                     ConvBNAct(bf, bf, 3, stride, 1, groups=bf, act=None), ConvBNAct(bf, bf, 1))

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats: Sequence[int] = (4, 8, 4), channels: Sequence[int] = (24, 116, 232, 464, 1024),
                 num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = ConvBNAct(3, channels[0], 3, 2, 1)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, c = [], channels[0]
        for n, cout in zip(repeats, channels[1:4]):
            stages.append(nn.Sequential(ShuffleUnit(c, cout, 2), *(ShuffleUnit(cout, cout, 1) for _ in range(n - 1))))
            c = cout
        self.stage2, self.stage3, self.stage4 = stages
        self.conv5 = ConvBNAct(c, channels[-1], 1)
        self.fc = nn.Linear(channels[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stage4(self.stage3(self.stage2(self.maxpool(self.conv1(x)))))
        return self.fc(self.conv5(x).mean([2, 3]))  # globalpool


def regnet_stages(depth: int, w_0: int, w_a: float, w_m: float, group_width: int) -> list[tuple[int, int, int]]:
    """torchvision's BlockParams.from_init_params (bottleneck multiplier 1): (width, depth, group
    width) per stage from the quantized linear width rule."""
    widths_cont = torch.arange(depth) * w_a + w_0
    capacity = torch.round(torch.log(widths_cont / w_0) / math.log(w_m))
    widths = (torch.round(torch.divide(w_0 * torch.pow(w_m, capacity), 8)) * 8).int().tolist()
    splits = [w != wp for w, wp in zip([*widths, 0], [0, *widths])]
    stage_widths = [w for w, t in zip(widths, splits[:-1]) if t]
    stage_depths = torch.diff(torch.tensor([d for d, t in enumerate(splits) if t])).int().tolist()
    groups = [min(group_width, w) for w in stage_widths]
    stage_widths = [make_divisible(w, g) for w, g in zip(stage_widths, groups)]
    return list(zip(stage_widths, stage_depths, groups))


class ResBottleneckBlock(nn.Module):
    """RegNet's X/Y block: 1x1, grouped 3x3 (stride), squeeze-excite (width from the block's input),
    1x1; projection shortcut when the shape changes; ReLU after the add."""

    def __init__(self, cin: int, cout: int, stride: int, group_width: int, se_ratio: float) -> None:
        super().__init__()
        self.proj = ConvBNAct(cin, cout, 1, stride, act=None) if cin != cout or stride != 1 else None
        self.f = nn.Sequential(
            ConvBNAct(cin, cout, 1), ConvBNAct(cout, cout, 3, stride, groups=cout // group_width),
            SqueezeExcite(cout, int(round(se_ratio * cin))), ConvBNAct(cout, cout, 1, act=None))
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        return self.activation((x if self.proj is None else self.proj(x)) + self.f(x))


class RegNet(nn.Module):
    def __init__(self, depth: int = 16, w_0: int = 48, w_a: float = 27.89, w_m: float = 2.09, group_width: int = 8,
                 se_ratio: float = 0.25, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = ConvBNAct(3, 32, 3, 2)
        stages, c = [], 32
        for w, d, g in regnet_stages(depth, w_0, w_a, w_m, group_width):
            stages.append(nn.Sequential(*(ResBottleneckBlock(c if i == 0 else w, w, 2 if i == 0 else 1, g, se_ratio)
                                          for i in range(d))))
            c = w
        self.trunk_output = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(torch.flatten(self.avgpool(self.trunk_output(self.stem(x))), 1))


# ---------------------------------------------------------------------------------------------
# VGG-11, AlexNet


def build_vgg11(num_classes: int = 1000) -> nn.Module:
    layers: list[nn.Module] = []
    cin = 3
    for v in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
            cin = int(v)
    return _pooled_mlp(nn.Sequential(*layers), 512, 7, num_classes, dropout_last=True)


def build_alexnet(num_classes: int = 1000) -> nn.Module:
    features = nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
    return _pooled_mlp(features, 256, 6, num_classes, dropout_last=False)


class _PooledMLP(nn.Module):
    def __init__(self, features: nn.Module, avgpool: nn.Module, classifier: nn.Module) -> None:
        super().__init__()
        self.features, self.avgpool, self.classifier = features, avgpool, classifier

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def _pooled_mlp(features: nn.Module, c: int, side: int, num_classes: int, dropout_last: bool) -> nn.Module:
    """VGG's and AlexNet's tail: adaptive average pool to side x side, three linear layers with
    ReLU and dropout (VGG: Linear ReLU Dropout x2; AlexNet: Dropout Linear ReLU x2)."""
    f = c * side * side
    if dropout_last:
        head = [nn.Linear(f, 4096), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.5)]
    else:
        head = [nn.Dropout(0.5), nn.Linear(f, 4096), nn.ReLU(True), nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(True)]
    return _PooledMLP(features, nn.AdaptiveAvgPool2d((side, side)), nn.Sequential(*head, nn.Linear(4096, num_classes)))


# ---------------------------------------------------------------------------------------------
# ConvNeXt-T


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor: permute to NHWC, layer norm, permute back."""

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim: int, layer_scale: float = 1e-6) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, 7, padding=3, groups=dim, bias=True), Permute([0, 2, 3, 1]), nn.LayerNorm(dim, eps=1e-6),
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), Permute([0, 3, 1, 2]))
        self.layer_scale = nn.Parameter(torch.ones(dim, 1, 1) * layer_scale)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer_scale * self.block(x) + x  # stochastic depth: identity in eval


def build_convnext_tiny(num_classes: int = 1000) -> nn.Module:
    norm = partial(LayerNorm2d, eps=1e-6)
    layers: list[nn.Module] = [ConvBNAct(3, 96, 4, 4, 0, norm=norm, act=None, bias=True)]
    for cin, cout, n in ((96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3)):
        layers.append(nn.Sequential(*(CNBlock(cin) for _ in range(n))))
        if cout is not None:
            layers.append(nn.Sequential(norm(cin), nn.Conv2d(cin, cout, 2, 2)))
    return Classifier(nn.Sequential(*layers), nn.Sequential(norm(768), nn.Flatten(1), nn.Linear(768, num_classes)),
                      flatten=False)


# ---------------------------------------------------------------------------------------------
# ViT-B/16


class EncoderBlock(nn.Module):
    def __init__(self, heads: int, hidden: int, mlp: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, dropout=0.0, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = MLP(hidden, mlp)

    def forward(self, inp: Tensor) -> Tensor:
        x = self.ln_1(inp)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + inp
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, layers: int = 12, heads: int = 12, hidden: int = 768,
                 mlp: int = 3072, num_classes: int = 1000) -> None:
        super().__init__()
        self.patch, self.hidden = patch, hidden
        self.conv_proj = nn.Conv2d(3, hidden, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        seq = (image // patch) ** 2 + 1
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, hidden).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential(*(EncoderBlock(heads, hidden, mlp) for _ in range(layers)))
        self.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.heads = nn.Sequential(nn.Linear(hidden, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        n, _, h, w = x.shape
        x = self.conv_proj(x).reshape(n, self.hidden, (h // self.patch) * (w // self.patch)).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        x = self.ln(self.layers(self.dropout(x + self.pos_embedding)))
        return self.heads(x[:, 0])


# ---------------------------------------------------------------------------------------------
# Swin-T


def patch_merging_pad(x: Tensor) -> Tensor:
    h, w = x.shape[-3:-1]
    x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
    return torch.cat([x[..., 0::2, 0::2, :], x[..., 1::2, 0::2, :], x[..., 0::2, 1::2, :], x[..., 1::2, 1::2, :]], -1)


class PatchMerging(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.reduction(self.norm(patch_merging_pad(x)))


def shifted_window_attention(x: Tensor, qkv: nn.Linear, proj: nn.Linear, bias: Tensor, window: Sequence[int],
                             heads: int, shift: Sequence[int]) -> Tensor:
    """torchvision's shifted_window_attention (v1, eval): pad to whole windows, cyclic shift with
    torch.roll, partition, multi-head attention with relative position bias (and the mask that
    keeps shifted windows' regions apart), merge windows, roll back, unpad."""
    b, h, w, c = x.shape
    pad_r, pad_b = (window[1] - w % window[1]) % window[1], (window[0] - h % window[0]) % window[0]
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    _, ph, pw, _ = x.shape
    shift = [0 if window[0] >= ph else shift[0], 0 if window[1] >= pw else shift[1]]  # one window: no shift
    if sum(shift) > 0:
        x = torch.roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    nw = (ph // window[0]) * (pw // window[1])
    x = x.view(b, ph // window[0], window[0], pw // window[1], window[1], c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b * nw, window[0] * window[1], c)
    q, k, v = qkv(x).reshape(x.size(0), x.size(1), 3, heads, c // heads).permute(2, 0, 3, 1, 4)
    q = q * (c // heads) ** -0.5
    attn = q.matmul(k.transpose(-2, -1)) + bias
    if sum(shift) > 0:
        mask = x.new_zeros((ph, pw))
        h_slices = ((0, -window[0]), (-window[0], -shift[0]), (-shift[0], None))
        w_slices = ((0, -window[1]), (-window[1], -shift[1]), (-shift[1], None))
        count = 0
        for hs in h_slices:
            for ws in w_slices:
                mask[hs[0]:hs[1], ws[0]:ws[1]] = count
                count += 1
        mask = mask.view(ph // window[0], window[0], pw // window[1], window[1])
        mask = mask.permute(0, 2, 1, 3).reshape(nw, window[0] * window[1])
        mask = mask.unsqueeze(1) - mask.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        attn = attn.view(x.size(0) // nw, nw, heads, x.size(1), x.size(1)) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, heads, x.size(1), x.size(1))
    attn = F.softmax(attn, dim=-1)
    x = proj(attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), c))
    x = x.view(b, ph // window[0], pw // window[1], window[0], window[1], c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, ph, pw, c)
    if sum(shift) > 0:
        x = torch.roll(x, shifts=(shift[0], shift[1]), dims=(1, 2))
    return x[:, :h, :w, :].contiguous()


class ShiftedWindowAttention(nn.Module):
    def __init__(self, dim: int, window: Sequence[int], shift: Sequence[int], heads: int) -> None:
        super().__init__()
        self.window, self.shift, self.heads = list(window), list(shift), heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window[0] - 1) * (2 * window[1] - 1), heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        coords = torch.flatten(torch.stack(torch.meshgrid(torch.arange(window[0]), torch.arange(window[1]), indexing="ij")), 1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
        rel[:, :, 0] += window[0] - 1
        rel[:, :, 1] += window[1] - 1
        rel[:, :, 0] *= 2 * window[1] - 1
        self.register_buffer("relative_position_index", rel.sum(-1).flatten())

    def forward(self, x: Tensor) -> Tensor:
        n = self.window[0] * self.window[1]
        bias = self.relative_position_bias_table[self.relative_position_index].view(n, n, -1)
        bias = bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        return shifted_window_attention(x, self.qkv, self.proj, bias, self.window, self.heads, self.shift)


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, window: Sequence[int], shift: Sequence[int]) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = ShiftedWindowAttention(dim, window, shift, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, 4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))  # stochastic depth: identity in eval
        return x + self.mlp(self.norm2(x))


class SwinTransformer(nn.Module):
    def __init__(self, embed: int = 96, depths: Sequence[int] = (2, 2, 6, 2), heads: Sequence[int] = (3, 6, 12, 24),
                 window: Sequence[int] = (7, 7), num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, embed, 4, 4), Permute([0, 2, 3, 1]), nn.LayerNorm(embed))]
        for i, (d, nh) in enumerate(zip(depths, heads)):
            dim = embed * 2 ** i
            layers.append(nn.Sequential(*(SwinBlock(dim, nh, window, [0 if j % 2 == 0 else s // 2 for s in window])
                                          for j in range(d))))
            if i < len(depths) - 1:
                layers.append(PatchMerging(dim))
        self.features = nn.Sequential(*layers)
        dim = embed * 2 ** (len(depths) - 1)
        self.norm = nn.LayerNorm(dim)
        self.permute = Permute([0, 3, 1, 2])
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.flatten(self.avgpool(self.permute(self.norm(self.features(x))))))


# ---------------------------------------------------------------------------------------------
# factories


def _factory(build: Callable[[], nn.Module], side: int = 224) -> Callable[..., tuple[nn.Module, tuple[Tensor]]]:
    def make(seed: int = 0) -> tuple[nn.Module, tuple[Tensor]]:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            module = build()
            x = torch.randn(1, 3, side, side)
        return module.eval(), (x,)

    return make


resnet18 = _factory(lambda: ResNet(BasicBlock, (2, 2, 2, 2)))
resnet50 = _factory(lambda: ResNet(Bottleneck, (3, 4, 6, 3)))
resnext50_32x4d = _factory(lambda: ResNet(Bottleneck, (3, 4, 6, 3), groups=32, width_per_group=4))
wide_resnet50_2 = _factory(lambda: ResNet(Bottleneck, (3, 4, 6, 3), width_per_group=128))
mobilenet_v2 = _factory(build_mobilenet_v2)
mobilenet_v3_large = _factory(build_mobilenet_v3_large)
efficientnet_b0 = _factory(build_efficientnet_b0)
squeezenet1_1 = _factory(SqueezeNet)
googlenet = _factory(GoogLeNet)
inception_v3 = _factory(Inception3, side=299)
densenet121 = _factory(DenseNet)
shufflenet_v2_x1_0 = _factory(ShuffleNetV2)
regnet_y_400mf = _factory(RegNet)
mnasnet1_0 = _factory(MNASNet)
vgg11 = _factory(build_vgg11)
alexnet = _factory(build_alexnet)
convnext_tiny = _factory(build_convnext_tiny)
vit_b_16 = _factory(VisionTransformer)
swin_t = _factory(SwinTransformer)

MODELS: dict[str, Callable[..., tuple[nn.Module, tuple[Tensor]]]] = {
    "resnet18": resnet18, "resnet50": resnet50, "resnext50_32x4d": resnext50_32x4d, "wide_resnet50_2": wide_resnet50_2,
    "mobilenet_v2": mobilenet_v2, "mobilenet_v3_large": mobilenet_v3_large, "efficientnet_b0": efficientnet_b0,
    "squeezenet1_1": squeezenet1_1, "googlenet": googlenet, "inception_v3": inception_v3, "densenet121": densenet121,
    "shufflenet_v2_x1_0": shufflenet_v2_x1_0, "regnet_y_400mf": regnet_y_400mf, "mnasnet1_0": mnasnet1_0,
    "vgg11": vgg11, "alexnet": alexnet, "convnext_tiny": convnext_tiny, "vit_b_16": vit_b_16, "swin_t": swin_t,
}

# torchvision's published parameter counts (weights' meta "num_params"). Inception-v3's and
# GoogLeNet's are the models as loaded: Inception-v3 keeps AuxLogits (3,326,696 parameters, left
# out here), GoogLeNet drops its auxiliary heads.
INCEPTION_AUX_PARAMS = 3_326_696
PUBLISHED_PARAMS: dict[str, int] = {
    "resnet18": 11_689_512, "resnet50": 25_557_032, "resnext50_32x4d": 25_028_904, "wide_resnet50_2": 68_883_240,
    "mobilenet_v2": 3_504_872, "mobilenet_v3_large": 5_483_032, "efficientnet_b0": 5_288_548,
    "squeezenet1_1": 1_235_496, "googlenet": 6_624_904, "inception_v3": 27_161_264 - INCEPTION_AUX_PARAMS,
    "densenet121": 7_978_856, "shufflenet_v2_x1_0": 2_278_604, "regnet_y_400mf": 4_344_144, "mnasnet1_0": 4_383_312,
    "vgg11": 132_863_336, "alexnet": 61_100_840, "convnext_tiny": 28_589_128, "vit_b_16": 86_567_656,
    "swin_t": 28_288_354,
}


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def main() -> None:
    import argparse
    import time

    ap = argparse.ArgumentParser(description="parameter counts (and forward passes) against torchvision's")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--forward", action="store_true", help="run a forward pass and print the output shape")
    args = ap.parse_args()
    bad = 0
    for name in args.models:
        module, (x,) = MODELS[name]()
        n, want = param_count(module), PUBLISHED_PARAMS[name]
        bad += n != want
        line = f"{name:20s} {n:>12,d} params (torchvision {want:>12,d}) {'ok' if n == want else 'MISMATCH'}"
        if args.forward:
            t0 = time.perf_counter()
            with torch.no_grad():
                y = module(x)
            line += f"  input {tuple(x.shape)} -> {tuple(y.shape)} in {time.perf_counter() - t0:.2f} s"
        print(line, flush=True)
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
