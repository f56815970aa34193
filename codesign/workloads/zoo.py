"""The model zoo: small torch modules with the layer shapes of the networks VTA users ran
(no weights are downloaded or needed: `from_torch` reads shapes only).

Every factory returns `(module, example_inputs)` at batch 1 (224x224 images for the classifiers).
torch is imported inside each factory: it is heavy and only the workload import needs it.

- resnet18/34/50: torchvision's architecture (BasicBlock / Bottleneck, stride on the 3x3 conv,
  1x1 downsample projections).
- vgg16, alexnet: torchvision's layer shapes (AlexNet 64-192-384-256-256 channels).
- mobilenet: MobileNet-v1 (width 1.0) as VTA users ran it ("MobileNet-G" in tophub, docs/vta.md §9):
  each 3x3 depthwise conv replaced by a grouped conv with 16 channels per group (groups 2..64),
  so the group conv template can run it.
- dcgan: the DCGAN generator (z = 100, ngf = 64, 64x64 RGB output): five 4x4 transposed convs.
- transformer: one encoder block (d_model 512, 8 heads, FFN 2048) on 16 tokens.
- lstm: one LSTM cell step (input 256, hidden 256) with the four gates as ONE fused GEMM over
  [x; h] (512 -> 1024), the usual fused formulation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GROUP_CHANNELS = 16  # channels per group of MobileNet-G's grouped 3x3 convs (tophub groups 2..64)


def _resnet(blocks: tuple[int, int, int, int], bottleneck: bool) -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    expansion = 4 if bottleneck else 1

    class Block(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * expansion
            if bottleneck:
                self.body = nn.Sequential(
                    nn.Conv2d(cin, width, 1, 1, 0, bias=False), nn.ReLU(),
                    nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.ReLU(),
                    nn.Conv2d(width, cout, 1, 1, 0, bias=False))
            else:
                self.body = nn.Sequential(
                    nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.ReLU(),
                    nn.Conv2d(width, width, 3, 1, 1, bias=False))
            self.down = (nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x: Any) -> Any:
            return torch.relu(self.body(x) + self.down(x))

    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, n in enumerate(blocks):
        width = 64 << stage
        for i in range(n):
            layers.append(Block(cin, width, 2 if i == 0 and stage > 0 else 1))
            cin = width * expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers), (torch.zeros(1, 3, 224, 224),)


def resnet18() -> tuple[Any, tuple[Any, ...]]:
    return _resnet((2, 2, 2, 2), bottleneck=False)


def resnet34() -> tuple[Any, tuple[Any, ...]]:
    return _resnet((3, 4, 6, 3), bottleneck=False)


def resnet50() -> tuple[Any, tuple[Any, ...]]:
    return _resnet((3, 4, 6, 3), bottleneck=True)


def vgg16() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    layers: list[nn.Module] = []
    cin = 3
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(cin, int(v), 3, 1, 1), nn.ReLU()]
            cin = int(v)
    layers += [nn.Flatten(), nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
               nn.Linear(4096, 1000)]
    return nn.Sequential(*layers), (torch.zeros(1, 3, 224, 224),)


def alexnet() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    net = nn.Sequential(
        nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, 1, 1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d(6), nn.Flatten(),
        nn.Linear(256 * 6 * 6, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))
    return net, (torch.zeros(1, 3, 224, 224),)


def mobilenet() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    layers: list[nn.Module] = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.ReLU()]
    cin = 32
    for cout, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
                         (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)):
        layers += [nn.Conv2d(cin, cin, 3, stride, 1, groups=cin // GROUP_CHANNELS, bias=False), nn.ReLU(),
                   nn.Conv2d(cin, cout, 1, 1, 0, bias=False), nn.ReLU()]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000)]
    return nn.Sequential(*layers), (torch.zeros(1, 3, 224, 224),)


def dcgan() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    ngf = 64
    net = nn.Sequential(
        nn.ConvTranspose2d(100, ngf * 8, 4, 1, 0, bias=False), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.ReLU(),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())
    return net, (torch.zeros(1, 100, 1, 1),)


def transformer() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    d_model, heads, ffn, tokens = 512, 8, 2048, 16

    class EncoderBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))
            self.up, self.down = nn.Linear(d_model, ffn), nn.Linear(ffn, d_model)
            self.n1, self.n2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            hd = d_model // heads

            def split(y: Any) -> Any:
                return y.reshape(b, t, heads, hd).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            att = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5, dim=-1)
            ctx = (att @ v).transpose(1, 2).reshape(b, t, d_model)
            x = self.n1(x + self.o(ctx))
            return self.n2(x + self.down(torch.relu(self.up(x))))

    return EncoderBlock(), (torch.zeros(1, tokens, d_model),)


def lstm() -> tuple[Any, tuple[Any, ...]]:
    import torch  # heavy; only building the zoo module needs it
    from torch import nn

    hidden, inp = 256, 256

    class LSTMCell(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gates = nn.Linear(inp + hidden, 4 * hidden)

        def forward(self, x: Any, h: Any, c: Any) -> Any:
            i, f, g, o = self.gates(torch.cat([x, h], dim=1)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    return LSTMCell(), (torch.zeros(1, inp), torch.zeros(1, hidden), torch.zeros(1, hidden))


# name -> (factory, one-line description)
ZOO: dict[str, tuple[Callable[[], tuple[Any, tuple[Any, ...]]], str]] = {
    "resnet18": (resnet18, "ResNet-18, 224x224"),
    "resnet34": (resnet34, "ResNet-34, 224x224"),
    "resnet50": (resnet50, "ResNet-50 (bottleneck blocks), 224x224"),
    "vgg16": (vgg16, "VGG-16, 224x224"),
    "alexnet": (alexnet, "AlexNet, 224x224"),
    "mobilenet": (mobilenet, "MobileNet-v1 with grouped 3x3 convs (16 channels per group), 224x224"),
    "dcgan": (dcgan, "DCGAN generator, z=100 -> 64x64 RGB (4x4 transposed convs)"),
    "transformer": (transformer, "transformer encoder block, 16 tokens, d_model 512, 8 heads, FFN 2048"),
    "lstm": (lstm, "LSTM cell step, input 256, hidden 256, fused gate GEMM 512 -> 1024"),
}
