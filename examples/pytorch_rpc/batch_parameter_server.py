"""A batching parameter server: trainers send gradients to the server, which answers none of
them until ``batch_update_size`` have arrived, then applies their average, and answers them all
with the new model. ``rpc.functions.async_execution`` lets the server hold those replies without
holding a thread per waiting trainer.

Port of pytorch/examples ``distributed/rpc/batch/parameter_server.py``: ``torch`` renamed to
``zgrad``, ``torchvision``'s ResNet-50 from ``models.py``, CPU instead of CUDA. ``--trainers``
(the batch update size), ``--num-batches``, ``--batch-size``, ``--image-size``, ``--width`` and
``--port`` size it for quick runs; the defaults are the original's.
"""

import argparse
import os
import threading
from datetime import datetime

import zgrad
import zgrad.distributed as dist
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.nn as nn
from zgrad import optim

import models

parser = argparse.ArgumentParser(description="batching parameter server over RPC")
parser.add_argument("--trainers", type=int, default=5, help="trainers, and updates per batch")
parser.add_argument("--num-batches", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=20)
parser.add_argument("--image-size", type=int, default=64)
parser.add_argument("--num-classes", type=int, default=30)
parser.add_argument("--width", type=int, default=64, help="channels of ResNet-50's first stage (64)")
parser.add_argument("--port", type=int, default=29500)
opts = parser.parse_args()

batch_size = opts.batch_size
image_w = image_h = opts.image_size
num_classes = opts.num_classes
batch_update_size = opts.trainers
num_batches = opts.num_batches


def timed_log(text):
    print(f"{datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


class BatchUpdateParameterServer(object):
    def __init__(self, batch_update_size=batch_update_size):
        self.model = models.resnet50(num_classes=num_classes, width=opts.width)
        self.lock = threading.Lock()
        self.future_model = zgrad.futures.Future()
        self.batch_update_size = batch_update_size
        self.curr_update_size = 0
        self.optimizer = optim.SGD(self.model.parameters(), lr=0.001, momentum=0.9)
        for p in self.model.parameters():
            p.grad = zgrad.zeros_like(p)

    def get_model(self):
        return self.model

    @staticmethod
    @rpc.functions.async_execution
    def update_and_fetch_model(ps_rref, grads):
        self = ps_rref.local_value()
        timed_log(f"PS got {self.curr_update_size}/{batch_update_size} updates")
        for p, g in zip(self.model.parameters(), grads):
            p.grad += g
        with self.lock:
            self.curr_update_size += 1
            fut = self.future_model
            if self.curr_update_size >= self.batch_update_size:
                for p in self.model.parameters():
                    p.grad /= self.batch_update_size
                self.curr_update_size = 0
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=False)
                fut.set_result(self.model)
                timed_log("PS updated model")
                self.future_model = zgrad.futures.Future()
        return fut


class Trainer(object):
    def __init__(self, ps_rref):
        self.ps_rref = ps_rref
        self.loss_fn = nn.MSELoss()
        self.one_hot_indices = zgrad.LongTensor(batch_size).random_(0, num_classes).view(batch_size, 1)

    def get_next_batch(self):
        for _ in range(num_batches):
            inputs = zgrad.randn(batch_size, 3, image_w, image_h)
            labels = zgrad.zeros(batch_size, num_classes).scatter_(1, self.one_hot_indices, 1)
            yield inputs, labels

    def train(self):
        name = rpc.get_worker_info().name
        m = self.ps_rref.rpc_sync().get_model()
        for inputs, labels in self.get_next_batch():
            timed_log(f"{name} processing one batch")
            self.loss_fn(m(inputs), labels).backward()
            timed_log(f"{name} reporting grads")
            m = rpc.rpc_sync(self.ps_rref.owner(), BatchUpdateParameterServer.update_and_fetch_model,
                             args=(self.ps_rref, [p.grad for p in m.cpu().parameters()]))
            timed_log(f"{name} got updated model")


def run_trainer(ps_rref):
    Trainer(ps_rref).train()


def run_ps(trainers):
    timed_log("Start training")
    ps_rref = rpc.RRef(BatchUpdateParameterServer())
    futs = [rpc.rpc_async(trainer, run_trainer, args=(ps_rref,)) for trainer in trainers]
    zgrad.futures.wait_all(futs)
    timed_log("Finish training")


def run(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(opts.port)
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=16, rpc_timeout=60)
    if rank != 0:
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size, rpc_backend_options=options)
        # trainers wait for the parameter server to start their training
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size, rpc_backend_options=options)
        run_ps([f"trainer{r}" for r in range(1, world_size)])
    rpc.shutdown()  # waits for every worker
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = batch_update_size + 1
    mp.spawn(run, args=(world_size,), nprocs=world_size, join=True)
