"""The distributed backward engine of one worker: FAST and SMART passes over a :class:`Messenger`
(the module table heads :mod:`zgrad.engine.dist.engine`)."""
