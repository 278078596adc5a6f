"""The kernel-side programming model: PE commands, the ``tl`` context, recipes,
and the greenlet kernel runner. Kernels see only ``tl``."""
