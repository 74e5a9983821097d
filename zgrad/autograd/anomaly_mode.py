"""``zgrad.autograd.anomaly_mode``: anomaly detection for backward passes, as
``torch.autograd.anomaly_mode`` (the switch lives in the engine, :mod:`zgrad.engine.anomaly_mode`)."""

from zgrad.engine.anomaly_mode import detect_anomaly, set_detect_anomaly

__all__ = ["detect_anomaly", "set_detect_anomaly"]
