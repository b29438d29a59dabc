// CUDA 13.0 `cudaError_enum` (cuda.h). Descriptions are ours: meaning and usual causes.
results! {
    CUDA_SUCCESS = 0, "The call succeeded.";
    CUDA_ERROR_INVALID_VALUE = 1, "An argument is out of range: a zero size, a null pointer, or a launch configuration over a device limit.";
    CUDA_ERROR_OUT_OF_MEMORY = 2, "The driver could not allocate the requested memory on the device or pinned host memory.";
    CUDA_ERROR_NOT_INITIALIZED = 3, "cuInit has not been called, or it failed.";
    CUDA_ERROR_DEINITIALIZED = 4, "The driver is shutting down: a call arrived after CUDA was deinitialised, typically from a static destructor at exit.";
    CUDA_ERROR_STUB_LIBRARY = 34, "The loaded libcuda is the toolkit's stub library, not the real driver: fix the library search path.";
    CUDA_ERROR_DEVICE_UNAVAILABLE = 46, "The device is unavailable: busy in exclusive-process mode, or prohibited.";
    CUDA_ERROR_NO_DEVICE = 100, "No CUDA-capable device is visible (driver absent, CUDA_VISIBLE_DEVICES empty or invalid).";
    CUDA_ERROR_INVALID_DEVICE = 101, "The device ordinal or handle is not valid for the visible devices.";
    CUDA_ERROR_INVALID_CONTEXT = 201, "No context is current on this thread, or the context handle is invalid.";
    CUDA_ERROR_INVALID_HANDLE = 400, "A handle (stream, event, function) is invalid, often because it was destroyed.";
    CUDA_ERROR_NOT_FOUND = 500, "A named symbol, entry point or resource was not found.";
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701, "The launch needs more resources (registers, shared memory) than the device has for this configuration.";
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709, "The context this call refers to was destroyed.";
    CUDA_ERROR_UNKNOWN = 999, "An unknown internal error.";
}
