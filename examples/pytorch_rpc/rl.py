"""REINFORCE over RPC: observers (ranks 1..) run cart-pole episodes, asking the agent (rank 0)
for each action and reporting each reward through RRef helpers; the agent trains its policy
after every episode until the running reward passes the environment's threshold.

Port of pytorch/examples ``distributed/rpc/rl/main.py``: ``torch`` renamed to ``zgrad``,
``gymnasium`` replaced by ``cartpole.py`` (same environment). ``--max-episodes`` (stop early,
0: until solved, as the original) and ``--port`` added for quick runs.
"""

import argparse
import os
from itertools import count

import numpy as np

import cartpole as gym
import zgrad
import zgrad.distributed.rpc as rpc
import zgrad.multiprocessing as mp
import zgrad.nn as nn
import zgrad.nn.functional as F
import zgrad.optim as optim
from zgrad.distributed.rpc import RRef, remote, rpc_async, rpc_sync
from zgrad.distributions import Categorical

TOTAL_EPISODE_STEP = 5000
AGENT_NAME = "agent"
OBSERVER_NAME = "observer{}"

parser = argparse.ArgumentParser(description="RPC RL example")
parser.add_argument("--world-size", type=int, default=2, metavar="W",
                    help="world size for RPC, rank 0 is the agent, others are observers")
parser.add_argument("--gamma", type=float, default=0.99, metavar="G", help="discount factor (default: 0.99)")
parser.add_argument("--seed", type=int, default=543, metavar="N", help="random seed (default: 543)")
parser.add_argument("--log-interval", type=int, default=10, metavar="N",
                    help="interval between training status logs (default: 10)")
parser.add_argument("--max-episodes", type=int, default=0, help="stop after this many episodes (0: until solved)")
parser.add_argument("--port", type=int, default=29500)
args = parser.parse_args()

zgrad.manual_seed(args.seed)


def _call_method(method, rref, *args, **kwargs):
    """On the owner of ``rref``: ``method(value, *args)``."""
    return method(rref.local_value(), *args, **kwargs)


def _remote_method(method, rref, *args, **kwargs):
    """``method`` of the object behind ``rref``, run on its owner; returns the result."""
    return rpc_sync(rref.owner(), _call_method, args=[method, rref] + list(args), kwargs=kwargs)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.dropout(self.affine1(x)))
        return F.softmax(self.affine2(x), dim=1)


class Observer:
    """Owns one environment; plays it with the agent's actions, reporting every reward."""

    def __init__(self):
        self.id = rpc.get_worker_info().id
        self.env = gym.make("CartPole-v1")
        self.env.reset(seed=args.seed)

    def run_episode(self, agent_rref, n_steps):
        state, ep_reward = self.env.reset()[0], 0
        for step in range(n_steps):
            action = _remote_method(Agent.select_action, agent_rref, self.id, state)
            state, reward, terminated, truncated, _ = self.env.step(action)
            _remote_method(Agent.report_reward, agent_rref, self.id, reward)
            if terminated or truncated:
                break


class Agent:
    def __init__(self, world_size):
        self.ob_rrefs = []
        self.agent_rref = RRef(self)
        self.rewards = {}
        self.saved_log_probs = {}
        self.policy = Policy()
        self.optimizer = optim.Adam(self.policy.parameters(), lr=1e-2)
        self.eps = np.finfo(np.float32).eps.item()
        self.running_reward = 0
        self.reward_threshold = gym.make("CartPole-v1").spec.reward_threshold
        for ob_rank in range(1, world_size):
            ob_info = rpc.get_worker_info(OBSERVER_NAME.format(ob_rank))
            self.ob_rrefs.append(remote(ob_info, Observer))
            self.rewards[ob_info.id] = []
            self.saved_log_probs[ob_info.id] = []

    def select_action(self, ob_id, state):
        """Sample an action for observer ``ob_id``; keep its log-probability for training."""
        state = zgrad.from_numpy(state).float().unsqueeze(0)
        probs = self.policy(state)
        m = Categorical(probs)
        action = m.sample()
        self.saved_log_probs[ob_id].append(m.log_prob(action))
        return action.item()

    def report_reward(self, ob_id, reward):
        self.rewards[ob_id].append(reward)

    def run_episode(self, n_steps=0):
        """Every observer plays ``n_steps`` (at most) at once; returns when all are done."""
        futs = [rpc_async(ob_rref.owner(), _call_method, args=(Observer.run_episode, ob_rref, self.agent_rref, n_steps))
                for ob_rref in self.ob_rrefs]
        for fut in futs:
            fut.wait()

    def finish_episode(self):
        """One REINFORCE step on all observers' steps; the worst observer's reward is the episode's."""
        R, probs, rewards = 0, [], []
        for ob_id in self.rewards:
            probs.extend(self.saved_log_probs[ob_id])
            rewards.extend(self.rewards[ob_id])
        min_reward = min([sum(self.rewards[ob_id]) for ob_id in self.rewards])
        self.running_reward = 0.05 * min_reward + (1 - 0.05) * self.running_reward
        for ob_id in self.rewards:
            self.rewards[ob_id] = []
            self.saved_log_probs[ob_id] = []
        policy_loss, returns = [], []
        for r in rewards[::-1]:
            R = r + args.gamma * R
            returns.insert(0, R)
        returns = zgrad.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + self.eps)
        for log_prob, R in zip(probs, returns):
            policy_loss.append(-log_prob * R)
        self.optimizer.zero_grad()
        policy_loss = zgrad.cat(policy_loss).sum()
        policy_loss.backward()
        self.optimizer.step()
        return min_reward


def run_worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(args.port)
    if rank == 0:
        rpc.init_rpc(AGENT_NAME, rank=rank, world_size=world_size)
        agent = Agent(world_size)
        for i_episode in count(1):
            n_steps = int(TOTAL_EPISODE_STEP / (args.world_size - 1))
            agent.run_episode(n_steps=n_steps)
            last_reward = agent.finish_episode()
            if i_episode % args.log_interval == 0:
                print(f"Episode {i_episode}\tLast reward: {last_reward:.2f}\tAverage reward: {agent.running_reward:.2f}")
            if agent.running_reward > agent.reward_threshold:
                print(f"Solved! Running reward is now {agent.running_reward}!")
                break
            if args.max_episodes and i_episode >= args.max_episodes:
                print(f"Stopped after {i_episode} episodes; running reward {agent.running_reward:.2f}")
                break
    else:
        rpc.init_rpc(OBSERVER_NAME.format(rank), rank=rank, world_size=world_size)
        # observers wait for the agent's calls
    rpc.shutdown()


def main():
    mp.spawn(run_worker, args=(args.world_size,), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
