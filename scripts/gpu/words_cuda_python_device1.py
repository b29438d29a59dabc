# Selects device 1 with cuda-python's runtime bindings on one GPU: the static runtime inside
# cuda.bindings refuses it; exits 1 with the error.
import sys
from cuda.bindings import runtime

(err,) = runtime.cudaSetDevice(1)
print(err)
sys.exit(0 if err == runtime.cudaError_t.cudaSuccess else 1)
