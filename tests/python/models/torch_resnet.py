"""torchvision's ResNet layout in plain PyTorch 1.13 (torchvision itself is
not needed): the same module names (conv1, bn1, layer1.0.downsample.0, fc)
and the v1.5 bottleneck (stride on the 3x3 conv). Used by resnet_parity.py
(Tessera vs PyTorch on the same weights) and bench/torch_resnet.py (training
speed). ARCHS maps a name to (bottleneck, blocks per stage, width, small
stem, classes).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ARCHS = {
    "resnet50": (True, [3, 4, 6, 3], 64, False, 1000),
    "resnet18": (False, [2, 2, 2, 2], 64, False, 1000),
    "tiny": (True, [1, 2], 8, True, 10),
}


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, width, stride):
        super().__init__()
        out = width * 4
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, width, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = None
        if stride != 1 or inplanes != width:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, width, 1, stride, bias=False), nn.BatchNorm2d(width))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet(nn.Module):
    def __init__(self, bottleneck, layers, width, small_stem, classes):
        super().__init__()
        block = Bottleneck if bottleneck else BasicBlock
        self.small_stem = small_stem
        self.conv1 = (nn.Conv2d(3, width, 3, 1, 1, bias=False) if small_stem
                      else nn.Conv2d(3, width, 7, 2, 3, bias=False))
        self.bn1 = nn.BatchNorm2d(width)
        channels = width
        for s, n in enumerate(layers):
            blocks = []
            for b in range(n):
                blocks.append(block(channels, width << s, 2 if s > 0 and b == 0 else 1))
                channels = (width << s) * block.expansion
            setattr(self, f"layer{s + 1}", nn.Sequential(*blocks))
        self.stages = len(layers)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if not self.small_stem:
            x = F.max_pool2d(x, 3, 2, 1)
        for s in range(self.stages):
            x = getattr(self, f"layer{s + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
