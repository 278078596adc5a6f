"""Where ranks sit and how they talk: the vocabulary host drivers, kernels and
collectives share (docs/adr/0037-study-packages-and-shared-geometry.md).

* ``ipcq``: the PE_IPCQ directions, their opposites, the queue sizing
  (``IpcqConfig``) and the one mirrored neighbour-table builder (``link``);
* ``groups``: CUBE groups (placement of a KV head's C x P ranks), lines and grid
  tours, and the reduce trees over them with their neighbour tables.

Pure arithmetic over coordinates: nothing here imports the simulator, so every
layer may use it.
"""
