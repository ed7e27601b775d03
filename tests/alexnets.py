"""Local AlexNets for the convert tests (torchvision does not import beside CI's CPU torch).

``TorchvisionAlexNet`` has torchvision.models.AlexNet's exact layout (module names, indices and
parameter shapes, so state_dict keys match); ``hidden`` shrinks the classifier for quick tests
(torchvision's is 4096). ``OriginalAlexNet`` is Krizhevsky et al.'s single-tower network
without LRN: 96 channels, padding 0, 227x227 input.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class TorchvisionAlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5, hidden: int = 4096):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


class OriginalAlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, hidden: int = 4096):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, kernel_size=11, stride=4),  # 227 -> 55
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),  # 27
            nn.Conv2d(96, 256, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),  # 13
            nn.Conv2d(256, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),  # 6
        )
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5),
            nn.Linear(256 * 6 * 6, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p=0.5),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


# torchvision.models.alexnet()'s state_dict: (key, shape) in order (torchvision 0.26).
TORCHVISION_STATE = [
    ("features.0.weight", (64, 3, 11, 11)), ("features.0.bias", (64,)),
    ("features.3.weight", (192, 64, 5, 5)), ("features.3.bias", (192,)),
    ("features.6.weight", (384, 192, 3, 3)), ("features.6.bias", (384,)),
    ("features.8.weight", (256, 384, 3, 3)), ("features.8.bias", (256,)),
    ("features.10.weight", (256, 256, 3, 3)), ("features.10.bias", (256,)),
    ("classifier.1.weight", (4096, 9216)), ("classifier.1.bias", (4096,)),
    ("classifier.4.weight", (4096, 4096)), ("classifier.4.bias", (4096,)),
    ("classifier.6.weight", (1000, 4096)), ("classifier.6.bias", (1000,)),
]
