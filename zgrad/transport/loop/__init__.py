"""The I/O loop of a mesh and what only it drives: the turns (``io_loop.py``), with its inbound
checks and dispatch (``inbound.py``) and its housekeeping, closing and loss (``upkeep.py``); the
I/O role's threads (``role.py``), the outbox (``outbox.py``), the outbound links (``links/``) and
the inbound stream connections (``stream_inbound.py``). See ``docs/transport.md``, Threading
model."""
