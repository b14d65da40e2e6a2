"""MNIST in the shape of PyTorch's classic example (pytorch/examples, mnist/main.py).

Written here from its structure (a small CNN, Adadelta, StepLR, train and
test per epoch). With torchvision it trains on MNIST; without it (or with
``--synthetic``) on random images of the same shape, so it runs offline.

    python mnist.py --epochs 2
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

from ringleader import elastic


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, loader, optimizer, epoch):  # type: ignore[no-untyped-def]
    model.train()
    for batch, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch % args.log_interval == 0:
            print(f"train epoch {epoch} batch {batch}/{len(loader)} loss {loss.item():.4f}")


def test(model, device, loader):  # type: ignore[no-untyped-def]
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            loss += F.nll_loss(output, target, reduction="sum").item()
            correct += (output.argmax(dim=1) == target).sum().item()
    print(f"test loss {loss / len(loader.dataset):.4f} accuracy {correct}/{len(loader.dataset)}")


def datasets(synthetic: bool, size: int) -> tuple[TensorDataset, TensorDataset]:
    try:
        if synthetic:
            raise ImportError
        from torchvision import datasets as tv
        from torchvision import transforms

        t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
        return tv.MNIST("data", train=True, download=True, transform=t), tv.MNIST(
            "data", train=False, transform=t
        )
    except ImportError:
        g = torch.Generator().manual_seed(0)
        images, labels = torch.randn(size + size // 6, 1, 28, 28, generator=g), torch.arange(
            size + size // 6
        ) % 10
        images += labels.view(-1, 1, 1, 1) / 5  # something to learn
        return TensorDataset(images[:size], labels[:size]), TensorDataset(
            images[size:], labels[size:]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="MNIST")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--synthetic", action="store_true", help="random images, no download")
    parser.add_argument("--size", type=int, default=6000, help="synthetic training examples")
    parser.add_argument("--save-model", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set, test_set = datasets(args.synthetic, args.size)
    train_loader = elastic.DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=args.test_batch_size)

    model = Net().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    model = elastic.prepare(model, optimizer, scheduler, lr_rule="none")
    for epoch in elastic.epochs(args.epochs):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == "__main__":
    main()
