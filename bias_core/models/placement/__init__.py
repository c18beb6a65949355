"""Where a model runs: devices and memory.

- ``devices``: the GPU each pytest-xdist worker takes, the device and dtype the reports show;
- ``memory``: how many rows one forward pass may hold on a GPU;
- ``gpu_fit``: whether the weights fit on the GPU, said before loading.

Part of the model seam: outside ``bias_core.models`` only ``devices`` is imported.
"""
