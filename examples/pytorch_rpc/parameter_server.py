"""Parameter-server training of an MNIST CNN: the parameter server (rank 0) holds the model and
runs its forward; trainers (ranks 1..) send batches over RPC, run the distributed backward and
step a DistributedOptimizer over the server's parameters.

Port of pytorch/examples ``distributed/rpc/parameter_server/rpc_parameter_server.py``: ``torch``
renamed to ``zgrad``; synthetic 28x28 digits instead of downloading MNIST (``--batches`` and
``--batch_size`` size them). One process per rank, as the original:

    python parameter_server.py --world_size 3 --rank 0 &
    python parameter_server.py --world_size 3 --rank 1 &
    python parameter_server.py --world_size 3 --rank 2
"""

import argparse
import os
from threading import Lock

import numpy as np

import zgrad
import zgrad.distributed.autograd as dist_autograd
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.nn as nn
import zgrad.nn.functional as F
from zgrad import optim
from zgrad.distributed.optim import DistributedOptimizer


# --------- the network: two convolutions, pooling, dropout, two linear layers -----------------

class Net(nn.Module):
    def __init__(self, num_gpus=0):
        super().__init__()
        print(f"Using {num_gpus} GPUs to train")
        self.num_gpus = num_gpus
        device = zgrad.device("cpu")
        if zgrad.accelerator.is_available() and self.num_gpus > 0:
            device = zgrad.device(f"{zgrad.accelerator.current_accelerator()}:0")
        print(f"Putting first 2 convs on {device}")
        self.conv1 = nn.Conv2d(1, 32, 3, 1).to(device)
        self.conv2 = nn.Conv2d(32, 64, 3, 1).to(device)
        if zgrad.accelerator.is_available() and self.num_gpus > 1:
            device = zgrad.device(f"{zgrad.accelerator.current_accelerator()}:1")
        print(f"Putting rest of layers on {device}")
        self.dropout1 = nn.Dropout2d(0.25).to(device)
        self.dropout2 = nn.Dropout2d(0.5).to(device)
        self.fc1 = nn.Linear(9216, 128).to(device)
        self.fc2 = nn.Linear(128, 10).to(device)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(self.conv2(x), 2)
        x = zgrad.flatten(self.dropout1(x), 1)
        x = x.to(next(self.fc1.parameters()).device)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


# --------- calling methods of objects held by RRefs ------------------------------------------

def call_method(method, rref, *args, **kwargs):
    """On the owner of ``rref``: ``method(value, *args)``."""
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    """``method`` of the object behind ``rref``, run on its owner; returns the result."""
    return rpc.rpc_sync(rref.owner(), call_method, args=[method, rref] + list(args), kwargs=kwargs)


# --------- the parameter server ---------------------------------------------------------------

class ParameterServer(nn.Module):
    def __init__(self, num_gpus=0):
        super().__init__()
        self.model = Net(num_gpus=num_gpus)
        self.input_device = zgrad.device("cpu")
        if zgrad.accelerator.is_available() and num_gpus > 0:
            self.input_device = zgrad.device(f"{zgrad.accelerator.current_accelerator()}:0")

    def forward(self, inp):
        out = self.model(inp.to(self.input_device))
        return out.to("cpu")  # RPC carries CPU tensors

    def get_dist_gradients(self, cid):
        """The gradients distributed autograd accumulated for this model in context ``cid``."""
        grads = dist_autograd.get_gradients(cid)
        return {k.to("cpu"): v.to("cpu") for k, v in grads.items()}

    def get_param_rrefs(self):
        """RRefs to the model's parameters, for the trainers' DistributedOptimizer."""
        return [rpc.RRef(param) for param in self.model.parameters()]


param_server = None
global_lock = Lock()


def get_parameter_server(num_gpus=0):
    """The one ParameterServer of this process (every trainer's rpc.remote gets the same)."""
    global param_server
    with global_lock:
        if not param_server:
            param_server = ParameterServer(num_gpus=num_gpus)
        return param_server


def run_parameter_server(rank, world_size):
    # The server only answers the trainers' calls: shutdown() returns once they are all done.
    print("PS master initializing RPC")
    rpc.init_rpc(name="parameter_server", rank=rank, world_size=world_size)
    print("RPC initialized! Running parameter server...")
    rpc.shutdown()
    print("RPC shutdown on parameter server.")


# --------- trainers -----------------------------------------------------------------------------

class TrainerNet(nn.Module):
    """The trainer's view of the model: every forward runs on the parameter server."""

    def __init__(self, num_gpus=0):
        super().__init__()
        self.num_gpus = num_gpus
        self.param_server_rref = rpc.remote("parameter_server", get_parameter_server, args=(num_gpus,))

    def get_global_param_rrefs(self):
        return remote_method(ParameterServer.get_param_rrefs, self.param_server_rref)

    def forward(self, x):
        return remote_method(ParameterServer.forward, self.param_server_rref, x)


def run_training_loop(rank, num_gpus, train_loader, test_loader):
    net = TrainerNet(num_gpus=num_gpus)
    opt = DistributedOptimizer(optim.SGD, net.get_global_param_rrefs(), lr=0.03)
    for i, (data, target) in enumerate(train_loader):
        with dist_autograd.context() as cid:
            model_output = net(data)
            target = target.to(model_output.device)
            loss = F.nll_loss(model_output, target)
            if i % 5 == 0:
                print(f"Rank {rank} training batch {i} loss {loss.item()}")
            dist_autograd.backward(cid, [loss])
            # the distributed backward reached the server's parameters:
            assert remote_method(ParameterServer.get_dist_gradients, net.param_server_rref, cid) != {}
            opt.step(cid)
    print("Training complete!")
    print("Getting accuracy....")
    get_accuracy(test_loader, net)


def get_accuracy(test_loader, model):
    model.eval()
    correct_sum = 0
    device = zgrad.device("cpu")
    if zgrad.accelerator.is_available() and model.num_gpus > 0:
        device = zgrad.device(f"{zgrad.accelerator.current_accelerator()}:0")
    with zgrad.no_grad():
        for data, target in test_loader:
            out = model(data)
            pred = out.argmax(dim=1, keepdim=True)
            pred, target = pred.to(device), target.to(device)
            correct_sum += pred.eq(target.view_as(pred)).sum().item()
    print(f"Accuracy {correct_sum / len(test_loader.dataset)}")


def run_worker(rank, world_size, num_gpus, train_loader, test_loader):
    print(f"Worker rank {rank} initializing RPC")
    rpc.init_rpc(name=f"trainer_{rank}", rank=rank, world_size=world_size)
    print(f"Worker {rank} done initializing RPC")
    run_training_loop(rank, num_gpus, train_loader, test_loader)
    rpc.shutdown()


# --------- synthetic digits in place of the MNIST download -------------------------------------

class SyntheticDigits:
    """``batches`` batches of 28x28 images whose class is drawn as a bright bar at a class-given
    row, plus noise: learnable, and shaped like MNIST after ``Normalize``."""

    def __init__(self, batches, batch_size, seed):
        rng = np.random.default_rng(seed)
        self.batches = []
        for _ in range(batches):
            labels = rng.integers(0, 10, size=batch_size)
            images = rng.normal(0.0, 0.3, size=(batch_size, 1, 28, 28)).astype(np.float32)
            for i, label in enumerate(labels):
                images[i, 0, 2 + 2 * label: 4 + 2 * label, 4:24] += 2.5
            self.batches.append((zgrad.from_numpy(images), zgrad.from_numpy(labels.astype(np.int64))))
        self.dataset = range(batches * batch_size)

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Parameter-Server RPC based training")
    parser.add_argument("--world_size", type=int, default=4,
                        help="number of processes: the parameter server and the trainers")
    parser.add_argument("--rank", type=int, default=None, help="this process's rank; 0 is the parameter server")
    parser.add_argument("--num_gpus", type=int, default=0, help="GPUs for the parameter server's model (0 to 2)")
    parser.add_argument("--master_addr", type=str, default="localhost", help="address of rank 0")
    parser.add_argument("--master_port", type=str, default="29500", help="port of rank 0")
    parser.add_argument("--batches", type=int, default=100, help="training batches per trainer (synthetic)")
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args()
    assert args.rank is not None, "must provide rank argument."
    assert args.num_gpus <= 3, f"Only 0-2 GPUs currently supported (got {args.num_gpus})."
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = args.master_port
    mp.set_start_method("spawn")  # fork would copy threads and locks of a half-started process
    if args.rank == 0:
        p = mp.Process(target=run_parameter_server, args=(0, args.world_size))
    else:
        train_loader = SyntheticDigits(args.batches, args.batch_size, seed=args.rank)
        test_loader = SyntheticDigits(max(1, args.batches // 5), args.batch_size, seed=1000 + args.rank)
        p = mp.Process(target=run_worker, args=(args.rank, args.world_size, args.num_gpus, train_loader, test_loader))
    p.start()
    p.join()
    raise SystemExit(p.exitcode)
