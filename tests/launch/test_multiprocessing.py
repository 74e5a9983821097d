"""``zgrad.multiprocessing.spawn`` as PyTorch's: the index first, the child's traceback raised in
the parent, siblings stopped, no orphans; and RPC between spawned workers, whose functions are
defined in the script (``__mp_main__`` in the children)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import spawn_targets as S
import zgrad.multiprocessing as mp
from rpc_harness import free_port
from paths import REPO, SUPPORT

pytestmark = pytest.mark.timeout(120)

HERE = SUPPORT  # spawn_targets, the children's functions, is a helper


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0): look at its state
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def test_spawn_runs_each_child_with_its_index_first(tmp_path):
    assert mp.spawn(S.record, args=(str(tmp_path), "hello"), nprocs=3, join=True) is None
    records = {p.name: p.read_text().split(":") for p in tmp_path.iterdir()}
    assert sorted(records) == ["0", "1", "2"]
    assert all(tag == "hello" and int(parent) == os.getpid() for tag, _, parent in records.values())


def test_a_child_that_raises_fails_the_parent_with_its_traceback_and_stops_the_others(tmp_path):
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(S.fail_one, args=(1, str(tmp_path), 2), nprocs=3)
    message = str(info.value)
    assert "Process 1 terminated with the following error" in message
    assert "ValueError: child 1 failed on purpose" in message and "fail_one" in message
    assert info.value.error_index == 1
    siblings = [int(p.read_text()) for p in tmp_path.glob("[0-9]")]
    assert len(siblings) == 2 and not any(alive(pid) for pid in siblings)


def test_a_child_killed_by_a_signal_is_named(tmp_path):
    with pytest.raises(mp.ProcessExitedException, match="process 0 terminated with signal SIGKILL") as info:
        mp.spawn(S.kill_self, args=(0,), nprocs=2)
    assert info.value.exit_code == -signal.SIGKILL and info.value.signal_name == "SIGKILL"


def test_join_false_returns_the_context(tmp_path):
    context = mp.spawn(S.sleep_for, args=(0.5, str(tmp_path)), nprocs=2, join=False)
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 2
    assert context.join(timeout=0.01) is False
    assert wait_until(lambda: context.join(timeout=1.0), 20)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="nprocs must be an integer >= 1, got 0"):
        mp.spawn(S.record, nprocs=0)
    with pytest.raises(ValueError, match="unknown start_method 'teleport'"):
        mp.start_processes(S.record, nprocs=1, start_method="teleport")
    assert mp.Process is __import__("multiprocessing").Process and callable(mp.set_start_method)


def test_children_die_with_a_parent_killed_by_sigkill(tmp_path):
    """No orphans: the parent is SIGKILLed mid-join (it cannot stop anything itself)."""
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(HERE)!r})
        import spawn_targets, zgrad.multiprocessing as mp
        if __name__ == "__main__":
            mp.spawn(spawn_targets.sleep_for, args=(60, {str(tmp_path)!r}), nprocs=2)
        """)], env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
    try:
        assert wait_until(lambda: len(list(tmp_path.iterdir())) == 2, 60), "children did not start"
        children = [int(p.read_text()) for p in tmp_path.iterdir()]
        assert all(alive(pid) for pid in children)
        parent.kill()
        parent.wait(10)
        assert wait_until(lambda: not any(alive(pid) for pid in children), 10), "orphans survived their parent"
    finally:
        parent.kill()
        parent.wait(10)


SCRIPT = '''
import os
import zgrad
import zgrad.multiprocessing as mp
from zgrad.distributed import rpc


def square(x):
    return x * x


class Accumulator:
    def __init__(self):
        self.total = 0

    def add(self, value):
        self.total += value
        return self.total


def _call_method(method, rref, *args):
    return method(rref.local_value(), *args)


def run_worker(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if rank == 0:
        rpc.init_rpc("master", rank=rank, world_size=world_size)
        acc = rpc.remote("worker1", Accumulator)
        values = [rpc.rpc_sync("worker1", square, args=(i,)) for i in range(4)]
        totals = [rpc.rpc_sync("worker1", _call_method, args=(Accumulator.add, acc, v)) for v in values]
        print("squares", values, "totals", totals, flush=True)
    else:
        rpc.init_rpc("worker1", rank=rank, world_size=world_size)
    rpc.shutdown()


if __name__ == "__main__":
    import sys
    mp.spawn(run_worker, args=(2, int(sys.argv[1])), nprocs=2, join=True)
    print("done", flush=True)
'''


def test_rpc_between_spawned_workers_resolves_the_scripts_functions(tmp_path):
    """Every PyTorch example's first RPC: a function of the script, called between spawned
    children (``__mp_main__`` there), over the env:// rendezvous."""
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script), str(free_port())], env=env, capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "squares [0, 1, 4, 9] totals [0, 1, 5, 14]" in done.stdout and "done" in done.stdout


@contextlib.contextmanager
def _child(ctx, target, args):
    """A started child process of ``ctx``, joined on leaving (killed if still alive after 60 s)."""
    child = ctx.Process(target=target, args=args)
    child.start()
    try:
        yield child
        child.join(60)
    finally:
        if child.is_alive():
            child.kill()
            child.join(10)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_shared_model_sent_to_a_child_is_trained_in_place(method):
    """The upstream mnist_hogwild flow: model.share_memory(), then the model among a child's
    arguments; under spawn the arguments are pickled, and the parameters travel by their shared
    memory (before, the child trained a private copy and the parent's model never changed)."""
    import zgrad

    model = zgrad.nn.Linear(2, 2)
    assert model.share_memory() is model and all(p.is_shared() for p in model.parameters())
    before = model.weight.detach().clone()
    view = zgrad.ones(4)[1:]
    view.share_memory_()
    ctx = mp.get_context(method)
    results, done = ctx.Queue(), ctx.Event()
    with _child(ctx, S.train_shared, (model, view, results, done)) as child:
        kind, requires_grad, sent = results.get(timeout=60)
        done.set()
    assert child.exitcode == 0
    assert zgrad.allclose(model.weight - before, zgrad.ones(2, 2)) and view.tolist() == [3.0] * 3
    assert (kind, requires_grad) == ("Parameter", True)
    assert sent.tolist() == [7.0, 7.0] and sent.is_shared()


def test_a_tensor_with_history_is_refused_at_the_process_boundary():
    import zgrad
    from multiprocessing.reduction import ForkingPickler

    x = zgrad.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor which requires_grad"):
        ForkingPickler.dumps(x)
    sent = ForkingPickler.dumps(x.detach())  # moved into shared memory on the way, as PyTorch moves it
    assert sent and x.detach().is_shared() is False


def _run(ctx, target, args, done):
    """Run a child to its end (it sets ``done``); its exit code."""
    with _child(ctx, target, args) as child:
        assert done.wait(60)
    return child.exitcode


def test_views_and_aliases_reach_a_spawned_child_as_views_of_the_same_memory():
    """Two views of one block among a child's arguments (one descriptor passed once), and a
    parameter's alias (p.detach()), which moves the parameter itself into shared memory."""
    import zgrad

    ctx = mp.get_context("spawn")
    base = zgrad.arange(6.0).reshape(2, 3).share_memory_()
    param = zgrad.nn.Parameter(zgrad.zeros(3))
    done = ctx.Event()
    assert _run(ctx, S.add_one_to_each, ([base, base[1], base[:, 0], param.detach()], done), done) == 0
    assert base.tolist() == [[2.0, 2.0, 3.0], [6.0, 6.0, 7.0]]
    assert param.is_shared() and param.tolist() == [1.0, 1.0, 1.0]


def test_a_received_view_sent_on_keeps_its_elements():
    import zgrad

    ctx = mp.get_context("spawn")
    b = zgrad.arange(6.0).reshape(3, 2).share_memory_()
    inbox, outbox, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    inbox.put(b[1])
    with _child(ctx, S.send_back, (inbox, outbox, done)):
        back = outbox.get(timeout=60)
        done.set()
    assert back.tolist() == [2.0, 3.0] and back.storage_offset() == 2


def test_a_view_of_unshared_memory_is_refused_rather_than_sent_apart():
    import zgrad
    from multiprocessing.reduction import ForkingPickler

    y = zgrad.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError, match=r"views memory other tensors hold.*base.share_memory_\(\)"):
        ForkingPickler.dumps(y[1])
    assert not y.is_shared()


def test_a_shared_block_holds_its_descriptors_only_while_it_lives():
    """Counted in a fresh interpreter: nothing else there opens or closes descriptors meanwhile."""
    script = textwrap.dedent("""
        import gc, os
        import zgrad
        def open_fds():
            return len(os.listdir("/proc/self/fd"))
        before = open_fds()
        blocks = [zgrad.ones(4).share_memory_() for _ in range(10)]
        held = open_fds() - before
        del blocks
        gc.collect()
        print(held, open_fds() - before)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["20", "0"]  # the memory file's descriptor and the mapping's, then none
