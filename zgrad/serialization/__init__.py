"""Checkpoints: ``zgrad.save`` and ``zgrad.load`` on safetensors files (docs/checkpoints.md)."""

from zgrad.serialization.api import load, save

__all__ = ["load", "save"]
