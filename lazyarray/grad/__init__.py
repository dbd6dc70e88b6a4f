"""The backward: gradient state of parameters (``leaf``), eager mode's record of what it
computed (``tape``), and the batched backward of a scope's flushes (``flush``, ``cell``)."""
