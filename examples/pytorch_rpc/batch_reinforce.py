"""REINFORCE with batched action selection: observers (ranks 1..) each run a cart-pole episode and
ask the agent (rank 0) for every action; with batching the agent answers all observers' requests
of a step with one forward pass (``rpc.functions.async_execution``), without it one by one.

Port of pytorch/examples ``distributed/rpc/batch/reinforce.py``: ``torch`` renamed to ``zgrad``,
``gymnasium`` replaced by ``cartpole.py`` (same environment), CPU instead of CUDA.
``--num-steps`` and ``--port`` added for quick runs.
"""

import argparse
import os
import threading
import time

import cartpole as gym
import zgrad
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.nn as nn
import zgrad.nn.functional as F
import zgrad.optim as optim
from zgrad.distributed.rpc import RRef, remote
from zgrad.distributions import Categorical

AGENT_NAME = "agent"
OBSERVER_NAME = "observer{}"

parser = argparse.ArgumentParser(description="RPC batch RL example")
parser.add_argument("--gamma", type=float, default=1.0, metavar="G", help="discount factor (default: 1.0)")
parser.add_argument("--seed", type=int, default=543, metavar="N", help="random seed (default: 543)")
parser.add_argument("--num-episode", type=int, default=10, metavar="E", help="number of episodes (default: 10)")
parser.add_argument("--max-world-size", type=int, default=3, metavar="W", help="maximum world size to test (default: 3)")
parser.add_argument("--num-steps", type=int, default=500, help="steps per episode (default: 500)")
parser.add_argument("--port", type=int, default=29500)
args = parser.parse_args()

NUM_STEPS = args.num_steps
zgrad.manual_seed(args.seed)


class Policy(nn.Module):
    """Two linear layers with dropout; action probabilities over the last dimension."""

    def __init__(self, batch=True):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)
        self.dim = 2 if batch else 1

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=self.dim)


class Observer:
    """Owns one environment; asks the agent for each action and returns its episode's rewards."""

    def __init__(self, batch=True):
        self.id = rpc.get_worker_info().id - 1
        self.env = gym.make("CartPole-v1")
        self.env.reset(seed=args.seed)
        self.select_action = Agent.select_action_batch if batch else Agent.select_action

    def run_episode(self, agent_rref, n_steps):
        state, _ = self.env.reset()
        ep_reward = NUM_STEPS
        rewards = zgrad.zeros(n_steps)
        start_step = 0
        for step in range(n_steps):
            state = zgrad.from_numpy(state).float().unsqueeze(0)
            action = rpc.rpc_sync(agent_rref.owner(), self.select_action, args=(agent_rref, self.id, state))
            state, reward, terminated, truncated, _ = self.env.step(action)
            rewards[step] = reward
            if terminated or truncated or step + 1 >= n_steps:
                curr_rewards = rewards[start_step:(step + 1)]
                R = 0
                for i in range(curr_rewards.numel() - 1, -1, -1):
                    R = curr_rewards[i] + args.gamma * R
                    curr_rewards[i] = R
                state, _ = self.env.reset()
                if start_step == 0:
                    ep_reward = min(ep_reward, step - start_step + 1)
                start_step = step + 1
        return [rewards, ep_reward]


class Agent:
    def __init__(self, world_size, batch=True):
        self.ob_rrefs = []
        self.agent_rref = RRef(self)
        self.rewards = {}
        self.policy = Policy(batch)
        self.optimizer = optim.Adam(self.policy.parameters(), lr=1e-2)
        self.running_reward = 0
        for ob_rank in range(1, world_size):
            ob_info = rpc.get_worker_info(OBSERVER_NAME.format(ob_rank))
            self.ob_rrefs.append(remote(ob_info, Observer, args=(batch,)))
            self.rewards[ob_info.id] = []
        self.states = zgrad.zeros(len(self.ob_rrefs), 1, 4)
        self.batch = batch
        # batched: one tensor of all observers' log-probs per step; else a list per observer
        self.saved_log_probs = [] if self.batch else {k: [] for k in range(len(self.ob_rrefs))}
        self.future_actions = zgrad.futures.Future()
        self.lock = threading.Lock()
        self.pending_states = len(self.ob_rrefs)

    @staticmethod
    @rpc.functions.async_execution
    def select_action_batch(agent_rref, ob_id, state):
        """Collect one state per observer; the last to arrive runs the policy for all of them."""
        self = agent_rref.local_value()
        self.states[ob_id].copy_(state)
        future_action = self.future_actions.then(lambda future_actions: future_actions.wait()[ob_id].item())
        with self.lock:
            self.pending_states -= 1
            if self.pending_states == 0:
                self.pending_states = len(self.ob_rrefs)
                # a copy, as the original's .cuda() makes: the next step's copy_ must not
                # change the input the policy saved for its backward
                probs = self.policy(self.states.clone())
                m = Categorical(probs)
                actions = m.sample()
                self.saved_log_probs.append(m.log_prob(actions).t()[0])
                future_actions = self.future_actions
                self.future_actions = zgrad.futures.Future()
                future_actions.set_result(actions.cpu())
        return future_action

    @staticmethod
    def select_action(agent_rref, ob_id, state):
        """Run the policy for one observer's state at once."""
        self = agent_rref.local_value()
        probs = self.policy(state)
        m = Categorical(probs)
        action = m.sample()
        self.saved_log_probs[ob_id].append(m.log_prob(action))
        return action.item()

    def run_episode(self, n_steps=0):
        """Every observer runs an episode; then one policy-gradient step on all of them."""
        futs = [ob_rref.rpc_async().run_episode(self.agent_rref, n_steps) for ob_rref in self.ob_rrefs]
        rets = zgrad.futures.wait_all(futs)
        rewards = zgrad.stack([ret[0] for ret in rets]).t()
        ep_rewards = sum([ret[1] for ret in rets]) / len(rets)
        if self.batch:
            probs = zgrad.stack(self.saved_log_probs)
        else:
            probs = zgrad.stack([zgrad.stack(self.saved_log_probs[i]) for i in range(len(rets))])
        policy_loss = -probs * rewards / len(rets)
        policy_loss.sum().backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.saved_log_probs = [] if self.batch else {k: [] for k in range(len(self.ob_rrefs))}
        self.states = zgrad.zeros(len(self.ob_rrefs), 1, 4)
        self.running_reward = 0.5 * ep_rewards + 0.5 * self.running_reward
        return ep_rewards, self.running_reward


def run_worker(rank, world_size, n_episode, batch, print_log=True):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(args.port)
    if rank == 0:
        rpc.init_rpc(AGENT_NAME, rank=rank, world_size=world_size)
        agent = Agent(world_size, batch)
        for i_episode in range(n_episode):
            last_reward, running_reward = agent.run_episode(n_steps=NUM_STEPS)
            if print_log:
                print(f"Episode {i_episode}\tLast reward: {last_reward:.2f}\tAverage reward: {running_reward:.2f}")
    else:
        rpc.init_rpc(OBSERVER_NAME.format(rank), rank=rank, world_size=world_size)
        # observers wait for the agent's calls
    rpc.shutdown()


def main():
    for world_size in range(2, args.max_world_size):
        delays = []
        for batch in [True, False]:
            tik = time.time()
            mp.spawn(run_worker, args=(world_size, args.num_episode, batch), nprocs=world_size, join=True)
            delays.append(time.time() - tik)
        print(f"{world_size}, {delays[0]}, {delays[1]}")


if __name__ == "__main__":
    main()
