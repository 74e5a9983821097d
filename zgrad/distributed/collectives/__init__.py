"""The collectives behind ``zgrad.distributed`` (``init_process_group``, ``all_reduce``, ...):
a process group's own mesh, its groups, their ring and one-hop algorithms (see ``api.py``)."""
