"""The DataLoader's machinery: collation, fetching, the worker processes and how batches travel
back from them (channel, codec, shared memory). Private; the public names are in
:mod:`zgrad.utils.data`."""
