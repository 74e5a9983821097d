"""Pipeline-parallel ResNet-50 over RPC: the master splits each batch into micro-batches; shard 1
(worker1) and shard 2 (worker2) process them as a pipeline, through RRefs, under one distributed
autograd context per batch.

Port of pytorch/examples ``distributed/rpc/pipeline/main.py``: ``torch`` renamed to ``zgrad``,
``torchvision``'s Bottleneck from ``models.py``, CPU devices, and no ``torch.compile`` of the
optimizer step (zgrad has no compiler; its SGD update is a fused Numba kernel already).
``--image-size``, ``--batch-size``, ``--num-classes``, ``--num-batches``, ``--splits``,
``--width`` and ``--port`` size it for quick runs; the defaults are the original's.

    python pipeline.py
"""

import argparse
import os
import threading
import time

import zgrad
import zgrad.distributed.autograd as dist_autograd
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.nn as nn
import zgrad.optim as optim
from zgrad.distributed.rpc import RRef

from models import Bottleneck

parser = argparse.ArgumentParser(description="pipeline-parallel ResNet-50 over RPC")
parser.add_argument("--image-size", type=int, default=128)
parser.add_argument("--batch-size", type=int, default=120)
parser.add_argument("--num-classes", type=int, default=1000)
parser.add_argument("--num-batches", type=int, default=3)
parser.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4, 8])
parser.add_argument("--width", type=int, default=64, help="channels of the first stage (64 in ResNet-50)")
parser.add_argument("--port", type=int, default=29500)
opts = parser.parse_args()

num_classes = opts.num_classes


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class ResNetBase(nn.Module):
    """What both shards share: how to build a stage of bottleneck blocks."""

    def __init__(self, block, inplanes, num_classes=1000, groups=1, width_per_group=64, norm_layer=None):
        super().__init__()
        self._lock = threading.Lock()
        self._block = block
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = inplanes
        self.dilation = 1
        self.groups = groups
        self.base_width = width_per_group

    def _make_layer(self, planes, blocks, stride=1):
        norm_layer = self._norm_layer
        downsample = None
        if stride != 1 or self.inplanes != planes * self._block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * self._block.expansion, stride),
                                       norm_layer(planes * self._block.expansion))
        layers = [self._block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                              self.dilation, norm_layer)]
        self.inplanes = planes * self._block.expansion
        for _ in range(1, blocks):
            layers.append(self._block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                      dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def parameter_rrefs(self):
        return [RRef(p) for p in self.parameters()]


class ResNetShard1(ResNetBase):
    """The stem and the first two stages."""

    def __init__(self, device, *args, **kwargs):
        super().__init__(Bottleneck, opts.width, num_classes=num_classes, *args, **kwargs)
        self.device = device
        self.seq = nn.Sequential(
            nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False),
            self._norm_layer(self.inplanes),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            self._make_layer(opts.width, 3),
            self._make_layer(opts.width * 2, 4, stride=2),
        ).to(self.device)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x_rref):
        x = x_rref.to_here().to(self.device)
        with self._lock:
            out = self.seq(x)
        return out.cpu()


class ResNetShard2(ResNetBase):
    """The last two stages, pooling and the classifier."""

    def __init__(self, device, *args, **kwargs):
        super().__init__(Bottleneck, opts.width * 8, num_classes=num_classes, *args, **kwargs)
        self.device = device
        self.seq = nn.Sequential(
            self._make_layer(opts.width * 4, 6, stride=2),
            self._make_layer(opts.width * 8, 3, stride=2),
            nn.AdaptiveAvgPool2d((1, 1)),
        ).to(self.device)
        self.fc = nn.Linear(opts.width * 8 * self._block.expansion, num_classes).to(self.device)

    def forward(self, x_rref):
        x = x_rref.to_here().to(self.device)
        with self._lock:
            out = self.fc(zgrad.flatten(self.seq(x), 1))
        return out.cpu()


class DistResNet50(nn.Module):
    """Both shards behind RRefs; forward pipelines micro-batches through them."""

    def __init__(self, split_size, workers, *args, **kwargs):
        super().__init__()
        self.split_size = split_size
        self.p1_rref = rpc.remote(workers[0], ResNetShard1, args=("cpu",) + args, kwargs=kwargs)
        self.p2_rref = rpc.remote(workers[1], ResNetShard2, args=("cpu",) + args, kwargs=kwargs)

    def forward(self, xs):
        out_futures = []
        for x in iter(xs.split(self.split_size, dim=0)):
            x_rref = RRef(x)
            y_rref = self.p1_rref.remote().forward(x_rref)
            z_fut = self.p2_rref.rpc_async().forward(y_rref)
            out_futures.append(z_fut)
        return zgrad.cat(zgrad.futures.wait_all(out_futures))

    def parameter_rrefs(self):
        remote_params = []
        remote_params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        remote_params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return remote_params


def create_optimizer_for_remote_params(worker_name, param_rrefs, lr=0.05):
    """An SGD optimizer on the worker that owns ``param_rrefs``."""
    params = [p.to_here() for p in param_rrefs]
    return optim.SGD(params, lr=lr)


def run_master(split_size):
    batch_size, image_w, image_h = opts.batch_size, opts.image_size, opts.image_size
    model = DistResNet50(split_size, ["worker1", "worker2"])
    loss_fn = nn.MSELoss()
    p1_param_rrefs = model.p1_rref.remote().parameter_rrefs().to_here()
    p2_param_rrefs = model.p2_rref.remote().parameter_rrefs().to_here()
    opt1_rref = rpc.remote("worker1", create_optimizer_for_remote_params, args=("worker1", p1_param_rrefs))
    opt2_rref = rpc.remote("worker2", create_optimizer_for_remote_params, args=("worker2", p2_param_rrefs))
    one_hot_indices = zgrad.LongTensor(batch_size).random_(0, num_classes).view(batch_size, 1)
    for i in range(opts.num_batches):
        print(f"Processing batch {i}")
        inputs = zgrad.randn(batch_size, 3, image_w, image_h)
        labels = zgrad.zeros(batch_size, num_classes).scatter_(1, one_hot_indices, 1)
        with dist_autograd.context() as context_id:
            outputs = model(inputs)
            dist_autograd.backward(context_id, [loss_fn(outputs, labels)])
            opt1_rref.rpc_sync().step()
            opt2_rref.rpc_sync().step()
            opt1_rref.rpc_sync().zero_grad()
            opt2_rref.rpc_sync().zero_grad()


def run_worker(rank, world_size, num_split):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(opts.port)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=256, rpc_timeout=300)
    if rank == 0:
        rpc.init_rpc("master", rank=rank, world_size=world_size, rpc_backend_options=options)
        run_master(num_split)
    else:
        rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
    rpc.shutdown()


if __name__ == "__main__":
    world_size = 3
    for num_split in opts.splits:
        tik = time.time()
        mp.spawn(run_worker, args=(world_size, num_split), nprocs=world_size, join=True)
        tok = time.time()
        print(f"number of splits = {num_split}, execution time = {tok - tik}")
