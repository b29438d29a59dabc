# Selects device 1 with CuPy on a host (or CUDA_VISIBLE_DEVICES) with one GPU: CuPy's static
# runtime refuses it (cudaErrorInvalidDevice) and the program exits 1.
import cupy

with cupy.cuda.Device(1):
    cupy.zeros(1)
