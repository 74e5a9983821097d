"""``zgrad.distributed``: RPC, distributed autograd and optimizer, collectives."""
