"""Loads a loom-trained ConvNet (safetensors) into PyTorch's ConvNet with a
strict load_state_dict and prints its accuracy on the MNIST test IDX files.

usage: eval_mnist.py MODEL.safetensors DATA_DIR
"""
import gzip
import os
import struct
import sys

import torch

from loom_torch import ConvNet, load_safetensors


def read_idx(root, base):
    path = os.path.join(root, base)
    opener = open
    if not os.path.exists(path):
        path, opener = path + ".gz", gzip.open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).reshape(dims)


def main():
    model_path, root = sys.argv[1], sys.argv[2]
    torch.set_num_threads(2)
    images = read_idx(root, "t10k-images-idx3-ubyte").float().div(255.0)
    images = images.sub(0.1307).div(0.3081).unsqueeze(1)
    labels = read_idx(root, "t10k-labels-idx1-ubyte").long()
    model = ConvNet()
    model.load_state_dict(load_safetensors(model_path), strict=True)
    model.eval()
    with torch.no_grad():
        predicted = model(images).argmax(1)
    correct = int((predicted == labels).sum())
    print("torch accuracy %.2f%% (%d/%d)" % (100.0 * correct / len(labels), correct, len(labels)))


if __name__ == "__main__":
    main()
