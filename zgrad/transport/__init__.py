"""The broker-less ZeroMQ mesh (filled in by the transport issue)."""
