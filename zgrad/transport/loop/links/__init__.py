"""The outbound links of one worker, one per peer: the interface (``base.py``), its two kinds,
a stream connection (``stream.py``) and a ZeroMQ DEALER (``dealer.py``), and the table that
makes a peer's link once, of the kind it can have, and hands the loop's calls to it
(``peer_links.py``)."""

from zgrad.transport.loop.links.peer_links import PeerLinks

__all__ = ["PeerLinks"]
