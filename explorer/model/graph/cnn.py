"""A ResNet-style CNN with bottleneck blocks (He et al., CVPR 2016, Table 1; v1.5 strides).

Tensors are [b, H, W, C] (channels last, the dim a 'column' split shards).
A convolution is a GEMM with M = b*H_out*W_out, K = C_in*k*k, N = C_out.
"""
from __future__ import annotations

import sympy as sp

from explorer.model.ops import ActTerm, Block, Operator
from explorer.symbols import b, beta


def conv(name, role, size_in, c_in, c_out, kernel, stride=1):
    size_out = size_in // stride
    m_rows = b * size_out * size_out
    flops = 2 * m_rows * c_in * kernel * kernel * c_out
    return Operator(name, "conv", role, (b, size_in, size_in, c_in), (b, size_out, size_out, c_out),
                    flops_fwd=flops, flops_bwd=2 * flops, params=sp.Integer(c_in * kernel * kernel * c_out),
                    act=(ActTerm(beta * b * size_in * size_in * c_in, "in"),),
                    gemm=(m_rows, c_out, c_in * kernel * kernel))


def batchnorm(name, size, channels, role="follow"):
    n = b * size * size * channels
    return Operator(name, "norm", role, (b, size, size, channels), (b, size, size, channels),
                    mem_bytes_fwd=2 * beta * n, params=sp.Integer(2 * channels),
                    act=(ActTerm(beta * n, "in"),))


def relu(name, size, channels, role="follow"):
    n = b * size * size * channels
    return Operator(name, "elementwise", role, (b, size, size, channels), (b, size, size, channels),
                    mem_bytes_fwd=2 * beta * n, act=(ActTerm(n / 8, "out"),))  # 1-bit mask


def bottleneck(index, size_in, c_in, width, stride, project):
    """1x1 (column) -> 3x3 (row) -> 1x1 (column) with batch-norms, ReLUs and the shortcut."""
    c_out, size = 4 * width, size_in // stride
    ops = [conv("conv1", "column", size_in, c_in, width, 1), batchnorm("bn1", size_in, width),
           relu("relu1", size_in, width), conv("conv2", "row", size_in, width, width, 3, stride),
           batchnorm("bn2", size, width, "stream"), relu("relu2", size, width, "stream"),
           conv("conv3", "column", size, width, c_out, 1), batchnorm("bn3", size, c_out)]
    if project:  # projection shortcut: 1x1 conv + BN on the block input
        shortcut = conv("shortcut", "none", size_in, c_in, c_out, 1, stride)
        ops.append(Operator("shortcut", "conv", "none", ops[-1].out_shape, ops[-1].out_shape,
                            flops_fwd=shortcut.flops_fwd, flops_bwd=shortcut.flops_bwd,
                            params=shortcut.params + 2 * c_out, gemm=shortcut.gemm))
    ops.append(Operator("add_relu", "elementwise", "stream", (b, size, size, c_out), (b, size, size, c_out),
                        mem_bytes_fwd=3 * beta * b * size * size * c_out,
                        act=(ActTerm(b * size * size * c_out / 8, "out"),)))
    key = ("cnn-bottleneck", size_in, c_in, width, stride, project)
    return Block(f"layer{index}", "layer", index, key, tuple(ops)), size, c_out


def cnn_blocks(image_size, in_channels, stage_blocks, base_width, classes) -> list:
    size = image_size // 2
    stem = Block("stem", "embedding", -1, ("cnn-stem", image_size, in_channels, base_width), (
        conv("stem_conv", "none", image_size, in_channels, base_width, 7, 2),
        batchnorm("stem_bn", size, base_width, "stream"), relu("stem_relu", size, base_width, "stream"),
        Operator("maxpool", "pool", "stream", (b, size, size, base_width),
                 (b, size // 2, size // 2, base_width), mem_bytes_fwd=beta * b * size * size * base_width * 5 / 4,
                 act=(ActTerm(beta * b * size * size * base_width, "in"),))))
    blocks, size, channels, index = [stem], size // 2, base_width, 0
    for stage, count in enumerate(stage_blocks):
        width = base_width * 2 ** stage
        for i in range(count):
            stride = 2 if (i == 0 and stage > 0) else 1
            block, size, out = bottleneck(index, size, channels, width, stride, project=(i == 0))
            blocks.append(block)
            channels, index = out, index + 1
    pool = Operator("avgpool", "pool", "stream", (b, size, size, channels), (b, channels),
                    mem_bytes_fwd=beta * b * size * size * channels)
    flops = 2 * b * channels * classes
    fc = Operator("fc", "matmul", "none", (b, channels), (b, classes), flops_fwd=flops, flops_bwd=2 * flops,
                  params=sp.Integer(channels * classes + classes), act=(ActTerm(beta * b * channels, "in"),),
                  gemm=(b, classes, channels))
    loss = Operator("loss", "loss", "follow", (b, classes), (b,), mem_bytes_fwd=2 * 4 * b * classes)
    blocks.append(Block("head", "head", index, ("cnn-head", channels, classes), (pool, fc, loss)))
    return blocks
