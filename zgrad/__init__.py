"""zgrad: distributed automatic differentiation over a broker-less ZeroMQ mesh."""
