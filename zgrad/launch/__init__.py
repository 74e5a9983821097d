"""The launcher and the built-in demo job."""
